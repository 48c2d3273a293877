import HTTPTypes
import Hummingbird
import SyncOData

/// Answers 405 with an `Allow` header, instead of the router's 404, to a method a known path does not
/// take (`PUT /tables/TodoItem`, `TRACE /metrics`), as the OpenAPI documents say: an item takes GET, PATCH, DELETE
/// and POST in 2.0.x, GET, PUT and DELETE in 3.0.x (the request's `ZUMO-API-VERSION`).
struct MethodNotAllowedMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    /// Whether `POST /batch` is served.
    var batch = true
    /// Whether the console's pages are served.
    var console = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let version =
                APIVersionMiddleware.queryVersion(request.uri.query ?? "")
                ?? request.headers[APIVersionMiddleware.headerName]
            let dialect = version.flatMap(APIVersionMiddleware.dialect(of:)) ?? .v2
            guard
                let allowed = Self.methods(forPath: request.uri.path, batch: batch, console: console, dialect: dialect),
                !allowed.contains(request.method)
            else {
                throw error
            }
            var refusal = APIError(
                .methodNotAllowed, "\(request.method) is not allowed here; use \(Self.list(allowed))")
            refusal.headers[.allow] = Self.list(allowed)
            throw refusal
        }
    }

    /// The methods of the route `path` matches in `dialect`, or nil for a path no route has.
    static func methods(forPath path: String, batch: Bool, console: Bool, dialect: ODataDialect)
        -> [HTTPRequest.Method]?
    {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        switch (parts.count, parts.first) {
        case (1, "console") where console: return [.get]
        case (3, "console") where console && ["tables", "assets", "api"].contains(parts.dropFirst().first):
            return [.get]
        case (4, "console") where console && parts.dropFirst().first == "api": return [.get]
        case (1, "health"), (1, "ready"), (1, "metrics"), (1, "openapi.yaml"), (1, "openapi-v3.yaml"), (1, "changes"):
            return [.get]
        case (1, "batch") where batch: return [.post]
        case (2, "tables") where !parts.last!.isEmpty: return [.get, .post]
        case (3, "tables") where !parts.dropFirst().contains(""):
            return dialect.tableWire.itemMethods
        case (4, "tables") where parts.dropFirst(2).first == "attachments" && !parts.dropFirst().contains(""):
            return [.get, .head, .put]
        default: return nil
        }
    }

    static func list(_ methods: [HTTPRequest.Method]) -> String {
        methods.map(\.rawValue).joined(separator: ", ")
    }
}
