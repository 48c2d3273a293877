import Foundation
import OfflineSync

/// A clock that moves only when a test says so. A test waits with ``nextSleep()`` until the code
/// under test has registered its sleep, then releases it with ``advance(by:)`` — no real waiting, no
/// timing assumptions (after postgres-nio's MockClock).
///
/// For example:
/// ```swift
/// let clock = ManualClock()
/// async let pulled = table.pull()           // a transient failure makes the pull sleep before retrying
/// let deadline = await clock.nextSleep()    // the pull is now asleep until `deadline`
/// clock.advance(to: deadline)               // …and wakes up
/// ```
public final class ManualClock: Clock, @unchecked Sendable {  // @unchecked: state behind `lock`.
    /// An instant of the manual clock: a duration since it started.
    public struct Instant: InstantProtocol, Sendable {
        /// Time since the clock started.
        public var offset: Duration

        /// Creates an instant.
        ///
        /// - Parameter offset: Time since the clock started.
        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = NSLock()
    private var current = Instant(offset: .zero)
    private var sleepers: [UUID: Sleeper] = [:]
    private var waiters: [(count: Int, continuation: CheckedContinuation<[Instant], Never>)] = []

    /// A clock at instant zero.
    public init() {}

    public var now: Instant { lock.withLock { current } }
    public var minimumResolution: Duration { .nanoseconds(1) }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (immediate, toNotify): (Bool, [(CheckedContinuation<[Instant], Never>, [Instant])]) = lock.withLock
                {
                    if deadline <= current || Task.isCancelled { return (true, []) }
                    sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    let deadlines = sleepers.values.map(\.deadline).sorted()
                    let due = waiters.filter { $0.count <= deadlines.count }
                    waiters.removeAll { $0.count <= deadlines.count }
                    return (false, due.map { ($0.continuation, deadlines) })
                }
                if immediate {
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        continuation.resume()
                    }
                }
                for (waiter, deadlines) in toNotify { waiter.resume(returning: deadlines) }
            }
        } onCancel: {
            let sleeper = lock.withLock { sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Waits until some code sleeps on this clock, and returns that sleep's deadline (at once if a
    /// sleep is already registered).
    ///
    /// - Returns: The earliest registered deadline.
    public func nextSleep() async -> Instant {
        await sleeps(atLeast: 1)[0]
    }

    /// Waits until at least `count` sleeps are registered on this clock — the code under test is parked in
    /// them — and returns their deadlines, earliest first. Code with several timers (a schedule, a backoff, a
    /// settle delay) is known to be quiet once each of them sleeps again.
    ///
    /// - Parameter count: How many sleeps to wait for.
    /// - Returns: Every registered deadline, earliest first.
    public func sleeps(atLeast count: Int) async -> [Instant] {
        await withCheckedContinuation { continuation in
            let deadlines: [Instant]? = lock.withLock {
                let deadlines = sleepers.values.map(\.deadline).sorted()
                if deadlines.count >= count { return deadlines }
                waiters.append((count, continuation))
                return nil
            }
            if let deadlines { continuation.resume(returning: deadlines) }
        }
    }

    /// Moves the clock forward, waking every sleep whose deadline has come.
    ///
    /// - Parameter duration: How far to move.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves the clock to `instant` (never backwards), waking every sleep whose deadline has come.
    ///
    /// - Parameter instant: The new time.
    public func advance(to instant: Instant) {
        let due: [Sleeper] = lock.withLock {
            if instant > current { current = instant }
            let due = sleepers.filter { $0.value.deadline <= current }
            for key in due.keys { sleepers[key] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
