import Foundation

/// A clock whose sleeps end at once, advancing its time by what was asked and recording it: for
/// tests that go through retries and backoff without waiting, and check the waits asked for.
///
/// For example:
/// ```swift
/// let clock = ImmediateClock()
/// configuration.clock = clock
/// _ = try? await client.push()        // retries a 503 without waiting
/// print(clock.sleeps)                 // [.milliseconds(500), .seconds(1), …]
/// ```
public final class ImmediateClock: Clock, @unchecked Sendable {  // @unchecked: state behind `lock`.
    public typealias Instant = ManualClock.Instant

    private let lock = NSLock()
    private var current = Instant(offset: .zero)
    private var asked: [Duration] = []

    /// Creates a clock at offset zero.
    public init() {}

    /// The durations of every sleep asked for, in order.
    public var sleeps: [Duration] { lock.withLock { asked } }

    public var now: Instant { lock.withLock { current } }

    public var minimumResolution: Duration { .zero }

    /// Returns at once (after a yield), with the clock advanced to `deadline`.
    ///
    /// - Throws: `CancellationError` when the task is cancelled.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try Task.checkCancellation()
        lock.withLock {
            asked.append(current.duration(to: deadline))
            if current < deadline { current = deadline }
        }
        await Task.yield()
    }
}
