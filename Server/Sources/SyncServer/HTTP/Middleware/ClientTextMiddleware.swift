import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// Refuses (400) a request whose target — path and query, as sent and percent-decoded — or one of whose header values
/// is not stream-safe text (``ClientText``: a run of more than 30 combining marks), before any route splits, hashes or
/// compares it: every `String` operation on what passes costs time linear in its length. A body is checked by its
/// parser (``JSONValue/ParsingLimits/clientText``).
struct ClientTextMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let target = request.uri.description
        guard ClientText.isStreamSafe(target),
            ODataQuery.percentDecode(target).map(ClientText.isStreamSafe) ?? true
        else { throw Self.refusal("URL") }
        for field in request.headers where !ClientText.isStreamSafe(field.value) {
            throw Self.refusal("\(field.name) header")
        }
        return try await next(request, context)
    }

    private static func refusal(_ part: String) -> APIError {
        APIError.badRequest(
            "The request's \(part) holds more than \(ClientText.maximumNonStarterRun) combining marks in a row",
            reason: .clientText)
    }
}
