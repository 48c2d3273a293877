import SyncSQLite
import Testing

@testable import SyncServer

/// `abandoning(after:)`, the server's one deadline (the SQLite store's query timeout, PostgreSQL's wait for a
/// connection and for a reply): an answer before the limit is returned; at the limit the caller is answered
/// without waiting for work that never ends; an exempt deadline waits; cancelling the caller cancels the work.
@Suite(.timeLimit(.minutes(3))) struct DeadlineTests {
    struct Expired: Error {}

    @Test func anAnswerBeforeTheLimitIsReturned() async throws {
        let value = try await abandoning(after: .seconds(10), throwing: { Expired() }) { 42 }
        #expect(value == 42)
    }

    @Test func workThatNeverEndsIsAbandonedAtTheLimit() async throws {
        let timedOut = Locked(false)
        let started = ContinuousClock.now
        await #expect(throws: Expired.self) {
            try await abandoning(
                after: .milliseconds(50), throwing: { Expired() }, onTimeout: { timedOut.withLock { $0 = true } }
            ) {
                // Ignores cancellation, as a PostgresNIO query written to a closing connection does.
                await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
            }
        }
        #expect(timedOut.withLock { $0 })
        // Never resumed, the work would hold the test forever: returning at all is the point. The bound is wide, as a
        // busy 2-core machine delays the timer's task by seconds (5.5 s seen while a build ran).
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test func anExemptDeadlineWaitsForTheWork() async throws {
        let value = try await abandoning(after: .milliseconds(20), unless: { true }, throwing: { Expired() }) {
            try await Task.sleep(for: .milliseconds(200))
            return "done"
        }
        #expect(value == "done")
    }

    /// The deadline and the work are an hour long: in the whole suite a 50 ms sleep once ended after more than 30 s
    /// (the 30 s deadline came first, 2026-11-28). The time limit ends the test if cancellation does not.
    @Test(.timeLimit(.minutes(3))) func cancellingTheCallerCancelsTheWork() async throws {
        let cancelled = Locked(false)
        let caller = Task {
            try await abandoning(after: .seconds(3600), throwing: { Expired() }) {
                do {
                    try await Task.sleep(for: .seconds(3600))
                } catch {
                    cancelled.withLock { $0 = true }
                    throw error
                }
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(cancelled.withLock { $0 })
    }
}
