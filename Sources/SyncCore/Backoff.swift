/// Waits that double after each failure in a row, from `initial` up to `maximum`, each scaled by a jitter factor:
/// the one backoff of the client's retries, its automatic sync and change follower, and the server's waits for
/// PostgreSQL.
///
/// For example, 0.5 s doubling to 60 s:
/// ```swift
/// var backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(60))
/// try await clock.sleep(for: backoff.next())   // 0.5 s, then 1 s, 2 s … 60 s
/// backoff.reset()                               // a success: the next failure waits 0.5 s again
/// ```
public struct Backoff: Sendable, Hashable {
    /// The wait after the first failure.
    public var initial: Duration
    /// The longest wait.
    public var maximum: Duration
    /// Failures since the last ``reset()``.
    public private(set) var failures = 0

    /// A backoff with no failure yet.
    ///
    /// - Parameters:
    ///   - initial: The wait after the first failure.
    ///   - maximum: The longest wait.
    public init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The wait after `attempt` failures in a row: `initial` × 2^(attempt − 1), at most `maximum`, times `jitter`
    /// (to the millisecond when it is not 1).
    ///
    /// - Parameters:
    ///   - attempt: Failures in a row, from 1 (0 counts as 1).
    ///   - jitter: The factor that spreads clients that failed together (0.9...1.1 for the client's retries).
    /// - Returns: How long to wait.
    public func delay(attempt: Int, jitter: Double = 1) -> Duration {
        var wait = min(initial, maximum)
        for _ in 0..<min(max(attempt - 1, 0), 62) where wait < maximum { wait = min(wait * 2, maximum) }
        guard jitter != 1 else { return wait }
        let milliseconds = Double(wait.components.seconds) * 1000 + Double(wait.components.attoseconds) / 1e15
        return .milliseconds(Int((milliseconds * jitter).rounded()))
    }

    /// Counts a failure and returns the wait before the next try.
    ///
    /// - Parameter jitter: The factor to apply (see ``delay(attempt:jitter:)``).
    /// - Returns: How long to wait.
    public mutating func next(jitter: Double = 1) -> Duration {
        failures += 1
        return delay(attempt: failures, jitter: jitter)
    }

    /// Forgets the failures: the next one waits ``initial`` again.
    public mutating func reset() { failures = 0 }
}
