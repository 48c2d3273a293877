import Foundation
import HTTPTypes
import Hummingbird

/// Answers 501 to a request whose body comes in a transfer coding other than plain `chunked` (RFC 9112
/// §6.1: `gzip`, `xchunked`, `gzip, chunked`, …): the server would otherwise read coded bytes as the body.
struct TransferCodingMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let codings = request.headers[values: .transferEncoding]
        if !codings.isEmpty,
            codings.flatMap({ $0.split(separator: ",") }).map({ $0.trimmingCharacters(in: .whitespaces).lowercased() })
                != ["chunked"]
        {
            throw APIError(
                .notImplemented,
                "Transfer-Encoding \(codings.joined(separator: ", ")) is not supported; send chunked or Content-Length")
        }
        return try await next(request, context)
    }
}
