import SyncCore
import Testing

@testable import OfflineSync

/// The one backoff: its schedule, as the retries of a push or a pull use it, and its count of failures.
@Suite(.timeLimit(.minutes(3))) struct BackoffTests {
    @Test(arguments: [(1, 0.5), (2, 1.0), (3, 2.0), (8, 60.0), (40, 60.0), (10_000, 60.0)])
    func retryDelaysDoubleUpToAMinute(attempt: Int, seconds: Double) {
        #expect(Backoff.retries.delay(attempt: attempt, jitter: 1.0) == .milliseconds(Int(seconds * 1000)))
        #expect(Backoff.retries.delay(attempt: attempt, jitter: 1.1) == .milliseconds(Int(seconds * 1100)))
        #expect(Backoff.retries.delay(attempt: attempt, jitter: 0.9) == .milliseconds(Int(seconds * 900)))
    }

    @Test func failuresDoubleTheWaitAndAResetStartsOver() {
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(4))
        #expect(
            (0..<7).map { _ in backoff.next() } == [0.25, 0.5, 1, 2, 4, 4, 4].map { .milliseconds(Int($0 * 1000)) })
        #expect(backoff.failures == 7)
        backoff.reset()
        #expect(backoff.next() == .milliseconds(250))
        // An initial wait above the maximum is the maximum; attempt 0 counts as the first.
        #expect(Backoff(initial: .seconds(9), maximum: .seconds(5)).delay(attempt: 0) == .seconds(5))
    }
}
