import Foundation
public import HTTPTypes
import Hummingbird
import NIOCore
public import SyncCore
public import SyncOData

/// A custom API: a route at `/api/{name}` beside the tables, JSON in and out, with the tables' authentication —
/// what the Azure Mobile Apps Node.js server's `app.api.add(name, …)` served and the iOS SDK's `invokeAPI` called.
///
/// For example:
/// ```swift
/// configuration.apis = [
///     CustomAPI("echo", methods: [.get, .post]) { request in
///         APIResponse(body: ["method": .string(request.method.rawValue), "body": request.body ?? .null])
///     }
/// ]
/// ```
/// A request needs `ZUMO-API-VERSION` (2.0.x or 3.0.x), as table requests do, unless the server does not check it.
/// A method the API does not take is answered 405 with an `Allow` header; a body that is not JSON, 415 (unless it
/// ``CustomAPI/takesOtherBodies``). Its name is matched without case.
public struct CustomAPI: Sendable {
    /// Answers one call. It may throw ``RequestRefusal`` to answer with a status and a message; any other error is
    /// a 500 whose details go to the log only.
    public typealias Handler = @Sendable (APIRequest) async throws -> APIResponse

    /// The name in the path: 1–128 letters, digits, `_` and `-`.
    public var name: String
    /// The methods it takes.
    public var methods: Set<HTTPRequest.Method>
    /// Who may call it; nil is as for tables: signed-in callers when the server checks tokens, anyone otherwise.
    public var access: Access?
    /// The code that answers.
    public var handler: Handler
    /// Whether a body of another media type than JSON reaches the handler (as ``APIRequest/otherBody``) instead of
    /// being answered 415; false by default.
    public var takesOtherBodies = false

    /// Creates an API.
    ///
    /// - Parameters:
    ///   - name: The name in the path (checked by ``SyncServerConfiguration/validate()``).
    ///   - methods: The methods it takes; GET, POST, PUT, PATCH and DELETE by default.
    ///   - access: Who may call it (see ``access``).
    ///   - handler: The code that answers.
    public init(
        _ name: String, methods: Set<HTTPRequest.Method> = [.get, .post, .put, .patch, .delete], access: Access? = nil,
        handler: @escaping Handler
    ) {
        self.name = name
        self.methods = methods
        self.access = access
        self.handler = handler
    }

    /// The methods a route is registered for: one the API does not take is a 405; HEAD, OPTIONS and others are 404s.
    static let routedMethods: [HTTPRequest.Method] = [.get, .post, .put, .patch, .delete]
}

/// One call of a ``CustomAPI``.
public struct APIRequest: Sendable {
    /// The method.
    public var method: HTTPRequest.Method
    /// The API's name.
    public var name: String
    /// The path's segments after the name, percent-decoded: `["title", "Amélie"]` for `/api/movies/title/Am%C3%A9lie`.
    public var path: [String]
    /// The query string's parameters, percent-decoded (`+` is a space); a repeated one keeps its last value.
    public var parameters: [String: String]
    /// The raw query string (for parameters given more than once), empty when there is none.
    public var query: String
    /// The header fields.
    public var headers: HTTPFields
    /// The JSON body, nil when the request has none.
    public var body: JSONValue?
    /// A body of another media type than JSON, for an API that takes them (``CustomAPI/takesOtherBodies``): its
    /// `Content-Type` (nil when the request has none) and bytes.
    public var otherBody: (contentType: String?, bytes: [UInt8])?
    /// Who called, when the request carried a valid token.
    public var caller: Caller?
    /// The server's tables, to read.
    public var tables: TableReader

    /// A query string's parameters, percent-decoded (`+` is a space); the last of a repeated one wins.
    ///
    /// - Parameter query: The query string, without `?`.
    /// - Returns: The parameters by name.
    public static func parameters(_ query: String) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in
                let spaced = text.replacingOccurrences(of: "+", with: " ")
                return ODataQuery.percentDecode(spaced) ?? spaced
            }
            parameters[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return parameters
    }

    /// The body decoded as `T`.
    ///
    /// - Parameter type: The type.
    /// - Returns: The value.
    /// - Throws: ``RequestRefusal`` (400) when there is no body or it does not decode as `T`.
    public func decodeBody<T: Decodable>(as type: T.Type) throws -> T {
        guard let body else { throw RequestRefusal(.badRequest, "The request needs a JSON body") }
        do {
            return try JSONDecoder().decode(T.self, from: body.serializedData())
        } catch {
            throw RequestRefusal(.badRequest, "The body is not what \(name) takes: \(error)")
        }
    }
}

/// Reads the server's tables for a custom API, as the Node.js server's `req.azureMobile.tables('…').read(query)` did:
/// every row the query selects, of every owner — no read hook, per-user scope or access rule applies (the API's own
/// access does); narrow the query to what the caller may see.
public struct TableReader: Sendable {
    let store: any TableStore
    let maxPageBytes: Int

    /// The rows `query` selects (its `$top`, at most 1,000; 1,000 without), as the table API shows them.
    ///
    /// - Parameters:
    ///   - table: The table's name.
    ///   - query: The filter, order, skip, top and selection.
    /// - Returns: The rows.
    /// - Throws: ``TableStoreError``: an unknown table or field, or the database unavailable. Cancellation stops
    ///   the read.
    public func read(_ table: String, _ query: ODataQuery = ODataQuery()) async throws -> [JSONValue] {
        let name: TableName
        do { name = try TableName(table) } catch {
            throw TableStoreError.invalidQuery("'\(table)' is not a table name")
        }
        let page = try await store.query(
            name, query, scope: .everything, limit: min(query.top ?? 1000, 1000), maxBytes: maxPageBytes)
        return try JSONValue(parsing: Data(page.itemsJSON)).arrayValue ?? []
    }
}

/// The answer of a ``CustomAPI``: a status, headers and a JSON body (or another, or none).
public struct APIResponse: Sendable {
    /// The status; 200 by default.
    public var status: HTTPResponse.Status
    /// More header fields (`Content-Type` is set for a body).
    public var headers: HTTPFields
    /// The body, or nil for none.
    public var body: JSONValue?
    /// A body of another media type than JSON (`text/xml`, `text/plain`, …), sent instead of ``body``.
    public var otherBody: (contentType: String, bytes: [UInt8])?

    /// Creates a response whose body is not JSON.
    ///
    /// - Parameters:
    ///   - status: The status.
    ///   - headers: More header fields.
    ///   - contentType: The body's media type, sent as `Content-Type`.
    ///   - text: The body, sent as UTF-8.
    public init(status: HTTPResponse.Status = .ok, headers: HTTPFields = [:], contentType: String, text: String) {
        self.init(status: status, headers: headers)
        otherBody = (contentType, Array(text.utf8))
    }

    /// Creates a response.
    ///
    /// - Parameters:
    ///   - status: The status.
    ///   - headers: More header fields.
    ///   - body: The JSON body, or nil for none.
    public init(status: HTTPResponse.Status = .ok, headers: HTTPFields = [:], body: JSONValue? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Creates a response whose body is `value` encoded as JSON.
    ///
    /// - Parameters:
    ///   - status: The status.
    ///   - headers: More header fields.
    ///   - value: The body.
    /// - Throws: `EncodingError` when `value` does not encode.
    public init(status: HTTPResponse.Status = .ok, headers: HTTPFields = [:], encoding value: some Encodable) throws {
        self.init(status: status, headers: headers, body: try JSONValue(parsing: JSONEncoder().encode(value)))
    }
}

/// A refusal, thrown by a custom API (and by table hooks) to answer with `status` and `{"error": message}`; the
/// client shows the message.
public struct RequestRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The status: a 4xx or 5xx (another is answered 500).
    public var status: HTTPResponse.Status
    /// What the caller is told.
    public var message: String

    /// Creates a refusal.
    ///
    /// - Parameters:
    ///   - status: The status, such as `.badRequest` or `.forbidden`.
    ///   - message: What the caller is told.
    public init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { "\(status.code): \(message)" }

    /// The answer: its status, or 500 when it is not an error status.
    var apiError: APIError {
        APIError(status.code >= 400 ? status : .internalServerError, message, reason: .refusedByApp)
    }
}

/// The `/api/{name}` routes.
struct CustomAPIRoutes: Sendable {
    let apis: [CustomAPI]
    let maxBodySize: Int
    let authenticates: Bool
    let tables: TableReader

    /// Routes `/api/{name}` and `/api/{name}/…`, the name matched without case (as the Node.js and ASP.NET servers
    /// route: the E2E suites call `applicationPermission` as `applicationpermission`).
    func addRoutes(to group: RouterGroup<SyncRequestContext>) {
        let byName = Dictionary(uniqueKeysWithValues: apis.map { ($0.name.lowercased(), $0) })
        for method in CustomAPI.routedMethods {
            for path in ["{apiName}", "{apiName}/**"] {
                group.on(RouterPath(path), method: method) { request, context in
                    // Names are ASCII (checked at startup): any other path is no API, decided from its bytes before
                    // anything lowercases or hashes client text.
                    guard let name = context.parameters.get("apiName"), name.utf8.count <= 128,
                        name.utf8.allSatisfy({ $0 < 0x80 }), let api = byName[name.lowercased()]
                    else { throw HTTPError(.notFound) }
                    return try await call(api, request, context)
                }
            }
        }
    }

    func call(_ api: CustomAPI, _ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let allowed = CustomAPI.routedMethods.filter(api.methods.contains)
        guard api.methods.contains(request.method) else {
            var refusal = APIError(.methodNotAllowed, "\(api.name) does not take \(request.method.rawValue)")
            refusal.headers[.allow] = MethodNotAllowedMiddleware.list(allowed)
            throw refusal
        }
        try Authorization.check(
            api.access ?? (authenticates ? .authenticated : .anonymous), caller: context.caller,
            what: "Calling \(api.name)", allowed: allowed)
        let query = request.uri.query ?? ""
        let path = (context.parameters.getCatchAll()).map { ODataQuery.percentDecode(String($0)) ?? String($0) }
        var call = APIRequest(
            method: request.method, name: api.name, path: path, parameters: APIRequest.parameters(query), query: query,
            headers: request.headers, body: nil, caller: context.caller, tables: tables)
        if Self.hasBody(request) {
            if api.takesOtherBodies, !JSONBody.isJSON(request) {
                let bytes = try await JSONBody.bytes(request, maxBytes: maxBodySize, what: "The request body")
                call.otherBody = (request.headers[.contentType], Array(buffer: bytes))
            } else {
                call.body = try await JSONBody.read(request, maxBytes: maxBodySize, what: "The request body")
            }
        }
        let answer: APIResponse
        do {
            answer = try await api.handler(call)
        } catch let refusal as RequestRefusal {
            throw refusal.apiError
        }
        var response =
            answer.body.map { JSONResponse.make(answer.status, $0) } ?? Response(status: answer.status)
        if let other = answer.otherBody {
            response = Response(
                status: answer.status, headers: [.contentType: other.contentType],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: other.bytes)))
        }
        for name in Set(answer.headers.map(\.name)) { response.headers[name] = nil }
        response.headers.append(contentsOf: answer.headers)
        return response
    }

    /// Whether the request carries a body (a length above 0, or a chunked one).
    static func hasBody(_ request: Request) -> Bool {
        if let length = request.headers[.contentLength] { return length != "0" }
        return request.headers[.transferEncoding] != nil
    }

}
