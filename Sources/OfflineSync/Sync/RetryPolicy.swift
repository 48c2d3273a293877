/// When and how long to wait before trying a request again.
struct RetryPolicy: Sendable {
    /// Retries after the first try.
    var limit: Int
    /// The clock that waits.
    var clock: any Clock<Duration>
    /// The jitter factor, in 0.9...1.1.
    var jitter: @Sendable () -> Double

    /// Statuses worth another try: the server is overloaded or failing for now.
    static func isTransient(status: Int) -> Bool {
        status == 429 || (500..<600).contains(status)
    }
}

/// The wait before retry `attempt` (1-based): 0.5 s, 1 s, 2 s, 4 s … capped at 60 s, times `jitter`
/// (0.9...1.1 spreads clients that failed together), to the millisecond.
///
/// - Parameters:
///   - attempt: Which retry this is, from 1.
///   - jitter: The factor to apply.
/// - Returns: How long to wait.
func retryDelay(attempt: Int, jitter: Double) -> Duration {
    let milliseconds = min(500 << min(max(attempt - 1, 0), 16), 60_000)
    return .milliseconds(Int((Double(milliseconds) * jitter).rounded()))
}
