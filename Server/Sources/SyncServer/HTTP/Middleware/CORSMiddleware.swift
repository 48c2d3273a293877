import HTTPTypes
import Hummingbird

/// Lets the pages of the configured origins call the server from a browser (CORS): answers their preflight
/// requests and marks their answers, errors included, readable, with `ETag`, `Link`, `Location`, `X-Sync-Scope` and
/// `WWW-Authenticate` exposed. Requests from other origins, or without one, pass as they are (the browser
/// then keeps the answer from the page).
struct CORSMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let configuration: CORSConfiguration

    /// The request headers a page may send: the protocol's (PROTOCOL.md §2) and the token's.
    static let allowedHeaders = [
        "Authorization", "Content-Type", "If-Match", "ZUMO-API-VERSION", "X-ZUMO-AUTH", "X-ZUMO-INSTALLATION-ID",
        "X-ZUMO-FEATURES", "X-ZUMO-VERSION", "X-Sync-Resend-Floor",
    ].joined(separator: ", ")

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let origin = request.headers[.origin], let allowed = allowedOrigin(origin) else {
            return try await next(request, context)
        }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            return Response(
                status: .noContent,
                headers: [
                    .accessControlAllowOrigin: allowed, .vary: "Origin",
                    .accessControlAllowMethods: "GET, POST, PATCH, DELETE",
                    .accessControlAllowHeaders: Self.allowedHeaders,
                    .accessControlMaxAge: String(configuration.maxAge.components.seconds),
                ])
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.accessControlAllowOrigin] = allowed
        response.headers[.accessControlExposeHeaders] =
            "ETag, Link, Location, WWW-Authenticate, X-Sync-Horizon, X-Sync-Scope, X-Sync-Watermark"
        response.headers.append(HTTPField(name: .vary, value: "Origin"))
        return response
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, or nil when it is not allowed.
    func allowedOrigin(_ origin: String) -> String? {
        if configuration.allowedOrigins.contains(origin) { return origin }
        return configuration.allowedOrigins.contains("*") ? "*" : nil
    }
}
