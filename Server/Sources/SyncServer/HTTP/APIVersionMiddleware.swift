import HTTPTypes
import Hummingbird

/// Requires `ZUMO-API-VERSION: 2.0.x` on table requests, as a header or a query parameter (any case); changes
/// need the header unless `acceptsQueryForChanges` (a web page can make a browser send the parameter, not the header).
struct APIVersionMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    static let headerName = HTTPField.Name("ZUMO-API-VERSION")!
    /// Whether a change may give the version as a query parameter.
    var acceptsQueryForChanges = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let header = request.headers[Self.headerName]
        let version = header ?? Self.queryVersion(request.uri.query ?? "")
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
        if version.hasPrefix("3.0.") {
            throw Self.refusal(
                "ZUMO-API-VERSION \(version) (the Datasync protocol) is not supported yet; use 2.0.0")
        }
        guard Self.isSupported(version) else {
            throw Self.refusal("ZUMO-API-VERSION \(version) is not supported; use 2.0.0")
        }
        return try await next(request, context)
    }

    /// A 400 counted as an `api_version` refusal.
    static func refusal(_ message: String) -> APIError { APIError.badRequest(message, reason: "api_version") }

    static func isSupported(_ version: String) -> Bool {
        let parts = version.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 3 && parts[0] == "2" && parts[1] == "0" && !parts[2].isEmpty
            && parts[2].allSatisfy(\.isASCIIDigitCharacter)
    }

    static func queryVersion(_ query: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "zumo-api-version" { return String(parts[1]) }
        }
        return nil
    }
}

extension Character {
    var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
