import HTTPTypes
import Hummingbird
import Metrics
import NIOCore

/// Admits each request by its caller's share (``FairShares``, ``AdmissionQueue``) before its work: the token's subject,
/// or without a token the client's address. A refusal is answered before the request's body is read — 429 for a caller
/// over its queue or rate, 503 for a server over its queue, each with `Retry-After` — so a request the server started
/// is never dropped. `/health`, `/ready` and `/metrics` (a balancer's and an operator's) and the change feed (a held
/// `GET /changes` waits for writes, not for the server) pass without a share. Each outcome is counted in
/// `sync_admissions{sync_outcome="admitted|queued|throttled|shed"}`.
struct FairShareMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    let queue: AdmissionQueue

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard !Self.passesFree(request.uri.path) else { return try await next(request, context) }
        let address = context.remoteAddress.flatMap { $0.ipAddress ?? $0.pathname }
        let caller = context.caller.map { "sub:\($0.subject)" } ?? "addr:\(address ?? "unknown")"
        let admission: AdmissionQueue.Admission
        do {
            admission = try await queue.admit(caller)
        } catch let refusal as AdmissionQueue.Refusal {
            throw Self.answer(refusal)
        }
        Self.count(admission == .atOnce ? "admitted" : "queued")
        defer { queue.release(caller) }
        return try await next(request, context)
    }

    /// The paths that take no share.
    static func passesFree(_ path: String) -> Bool {
        ["/health", "/ready", "/metrics", "/changes"].contains { path == $0 || path.hasPrefix($0 + "/") }
    }

    /// The answer to a refusal, counted.
    static func answer(_ refusal: AdmissionQueue.Refusal) -> APIError {
        var error: APIError
        switch refusal {
        case .callerQueueFull:
            Self.count("throttled")
            error = APIError(
                .tooManyRequests, "Too many of your requests are waiting; try again shortly", reason: .callerBusy)
            error.headers[.retryAfter] = "1"
        case .rateExceeded(let seconds):
            Self.count("throttled")
            error = APIError(
                .tooManyRequests, "You are sending requests faster than this server allows; try again shortly",
                reason: .callerRate)
            error.headers[.retryAfter] = "\(seconds)"
        case .serverQueueFull:
            Self.count("shed")
            error = APIError(.serviceUnavailable, "The server is busy; try again shortly", reason: .serverBusy)
            error.headers[.retryAfter] = "1"
        }
        return error
    }

    static func count(_ outcome: String) {
        Counter(label: "sync.admissions", dimensions: [("sync.outcome", outcome)]).increment()
    }
}
