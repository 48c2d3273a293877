/// The system's continuous clock with every wait shortened by a factor: for tests that go through real waits — a
/// server's `Retry-After`, the SDK's backoff — in a fraction of their time, with the ordering real waits give (unlike
/// ``ImmediateClock``, whose waits all end at once).
///
/// For example, a `Retry-After: 1` that waits 20 ms:
/// ```swift
/// configuration.clock = ScaledClock(by: 1.0 / 50)
/// ```
public struct ScaledClock: Clock {
    public typealias Instant = ContinuousClock.Instant

    /// What each wait is multiplied by.
    public let factor: Double

    /// Creates a clock whose waits last `factor` times as long (0 to 1 shortens them).
    ///
    /// - Parameter factor: The factor, at least 0.
    public init(by factor: Double) {
        self.factor = max(0, factor)
    }

    public var now: Instant { ContinuousClock.now }

    public var minimumResolution: Duration { ContinuousClock().minimumResolution }

    /// Waits `factor` times the time until `deadline` (at once when it has passed).
    ///
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try await Task.sleep(for: max(.zero, (deadline - now) * factor))
    }
}
