import HTTPTypes
import Hummingbird
import SyncOData

/// Requires `ZUMO-API-VERSION` on table requests, as a header or a query parameter (any case; the parameter wins,
/// as in PROTOCOL-v3.md §2): `2.0.x` speaks v2 (PROTOCOL.md), `3.0.x` the Datasync dialect (PROTOCOL-v3.md;
/// not for `POST /batch`); changes need the header unless `acceptsQueryForChanges` (a web page can make a browser
/// send the parameter, not the header).
struct APIVersionMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    static let headerName = HTTPField.Name("ZUMO-API-VERSION")!
    /// Whether a change may give the version as a query parameter.
    var acceptsQueryForChanges = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let header = request.headers[Self.headerName]
        let version = Self.queryVersion(request.uri.query ?? "").map { ODataQuery.percentDecode($0) ?? $0 } ?? header
        if header == nil, version != nil, !acceptsQueryForChanges, request.method != .get, request.method != .head {
            throw Self.refusal(
                "Changes need the ZUMO-API-VERSION header: the query parameter is accepted for reads only, since any "
                    + "web page can make a browser send it")
        }
        guard let version else {
            throw Self.refusal(
                "The request could not be completed because it needs to specify a ZUMO-API-VERSION of 2.0.0 "
                    + "(header or query parameter)")
        }
        switch Self.dialect(of: version) {
        case .v2?:
            return try await next(request, context)
        case .v3?:
            guard !request.uri.path.hasPrefix("/batch") else {
                throw Self.refusal("POST /batch speaks ZUMO-API-VERSION 2.0.0 only (docs/batch.md)")
            }
            var context = context
            context.dialect = .v3
            return try await next(request, context)
        case nil:
            throw Self.refusal("ZUMO-API-VERSION \(version) is not supported; use 2.0.0 or 3.0.0")
        }
    }

    /// A 400 counted as an `api_version` refusal.
    static func refusal(_ message: String) -> APIError { APIError.badRequest(message, reason: .apiVersion) }

    /// The dialect of a `ZUMO-API-VERSION`: `2.0.x` or `3.0.x` (`x` digits); nil for any other.
    static func dialect(of version: String) -> ODataDialect? {
        let parts = version.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1] == "0", !parts[2].isEmpty, parts[2].allSatisfy(\.isASCIIDigitCharacter)
        else { return nil }
        switch parts[0] {
        case "2": return .v2
        case "3": return .v3
        default: return nil
        }
    }

    static func queryVersion(_ query: String) -> String? {
        for pair in query.split(separator: "&") {
            // An empty value is a version given (and refused), not an absent one: the parameter wins.
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2, parts[0].lowercased() == "zumo-api-version" { return String(parts[1]) }
        }
        return nil
    }
}

extension Character {
    var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
