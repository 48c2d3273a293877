import Foundation
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
    /// A stopwatch started now on this clock: each call of it says how long ago that was.
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
