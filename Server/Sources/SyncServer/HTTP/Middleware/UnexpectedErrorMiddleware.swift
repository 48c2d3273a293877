import Hummingbird
import Logging
import Metrics

/// Counts each refusal in `sync_refusals{sync_reason}`, and turns any error that is not already an HTTP
/// answer into a generic 500 with a JSON body, logged at `error` level with the request id (Hummingbird's
/// logger carries it).
struct UnexpectedErrorMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            Self.count(error)
            throw error
        } catch let error as any HTTPResponseError {
            throw error
        } catch {
            context.logger.error(
                "Unexpected error", metadata: ["sync.error": "\(String(reflecting: type(of: error)))"])
            throw APIError(.internalServerError, "The server could not complete the request")
        }
    }

    /// Counts a refusal in `sync_refusals{sync_reason}`.
    static func count(_ error: APIError) {
        Counter(label: MetricLabel.refusals, dimensions: [(MetricLabel.reason, error.refusalReason)]).increment()
    }
}
