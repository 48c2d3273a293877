import Foundation
import HTTPTypes
import Hummingbird

/// Refuses a request body in a coding the server does not decode, before any route reads it — the server would
/// otherwise read coded bytes as the body:
/// - a transfer coding other than plain `chunked` (RFC 9112 §6.1: `gzip`, `xchunked`, `gzip, chunked`, …): 501;
/// - a content coding other than `identity` (`Content-Encoding: gzip`, as .NET's and Python's clients can send): 415
///   with `Accept-Encoding: identity`, which says what is taken (RFC 9110 §15.5.16, §12.5.3).
struct BodyCodingMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let transfer = request.headers[values: .transferEncoding]
        if !transfer.isEmpty, Self.codings(transfer) != ["chunked"] {
            throw APIError(
                .notImplemented,
                "Transfer-Encoding \(transfer.joined(separator: ", ")) is not supported; send chunked or Content-Length"
            )
        }
        let content = request.headers[values: .contentEncoding]
        if !content.isEmpty, Self.codings(content).contains(where: { $0 != "identity" }) {
            var refusal = APIError(
                .unsupportedMediaType,
                "Content-Encoding \(content.joined(separator: ", ")) is not supported; send the body uncoded")
            refusal.headers[.acceptEncoding] = "identity"
            throw refusal
        }
        return try await next(request, context)
    }

    /// The codings a header's values list, lowercased, in order.
    private static func codings(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }
}
