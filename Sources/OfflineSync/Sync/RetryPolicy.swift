import Foundation
import Logging
import SyncCore

/// When and how long to wait before trying a request again.
struct RetryPolicy: Sendable {
    /// Retries after the first try.
    var limit: Int
    /// The clock that waits.
    var clock: any Clock<Duration>
    /// The jitter factor, in 0.9...1.1.
    var jitter: @Sendable () -> Double
}

extension Clock where Duration == Swift.Duration {
    /// A stopwatch started now on this clock: each call of it says how long ago that was (the pull's pacing
    /// measures its waits on the injected clock).
    func stopwatch() -> () -> Duration {
        let started = now
        return { started.duration(to: self.now) }
    }
}

/// Why a sync stops before its end: nothing is recorded against any operation.
enum SyncStop: Error {
    case unavailable(ServerUnavailableError)
    case unauthorized
    case cancelled
}

extension SyncContext {
    /// Sends a request until its reply is not transient, waiting as ``Backoff/retries`` says
    /// (or the server's `Retry-After`, at most 60 s) between tries, at most `retry.limit` retries.
    ///
    /// - Parameters:
    ///   - logger: Where retries are logged.
    ///   - send: Sends the request once.
    ///   - isTransient: Whether a reply is worth another try (by default 5xx, 408 and 429); a transient
    ///     2xx counts as an unreadable reply.
    /// - Returns: The first reply that is not transient.
    /// - Throws: ``SyncStop``: unavailable after the last try, unauthorized on a 401, cancelled.
    func sendRetrying(
        logger: Logger, _ send: () async throws -> HTTPResponseData,
        isTransient: (HTTPResponseData) -> Bool = { isTransientStatus($0.status) }
    ) async throws -> HTTPResponseData {
        var attempt = 0
        while true {
            attempt += 1
            let reason: ServerUnavailableError.Reason
            var wait: Duration?
            do {
                let response = try await send()
                if response.status == 401 { throw SyncStop.unauthorized }
                if !isTransient(response) { return response }
                reason =
                    (200..<300).contains(response.status)
                    ? .unreadableReply(status: response.status) : .status(response.status)
                wait = response.header("Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                    .map { Duration.seconds(min(max($0, 0), 60)) }
            } catch let error as TransportError {
                if error.code == .cancelled { throw SyncStop.cancelled }
                reason = .noReply(error)
            }
            if Task.isCancelled { throw SyncStop.cancelled }
            guard attempt <= retry.limit else {
                throw SyncStop.unavailable(ServerUnavailableError(reason, attempts: attempt))
            }
            let delay = max(Backoff.retries.delay(attempt: attempt, jitter: retry.jitter()), wait ?? .zero)
            logger.info("Retrying a request", metadata: [SyncLogKey.attempt: "\(attempt)"])
            do { try await retry.clock.sleep(for: delay) } catch { throw SyncStop.cancelled }
        }
    }
}

/// Statuses worth another try: the server is overloaded or failing for now (5xx), or timed out
/// waiting for the request (408), or asks to slow down (429).
func isTransientStatus(_ status: Int) -> Bool {
    status == 408 || status == 429 || (500..<600).contains(status)
}

extension Backoff {
    /// The retries of a push or a pull: 0.5 s, 1 s, 2 s, 4 s … capped at 60 s (times the jitter, 0.9...1.1, which
    /// spreads clients that failed together).
    static let retries = Backoff(initial: .milliseconds(500), maximum: .seconds(60))
}
