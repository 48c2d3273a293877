import SyncSQLite

/// The places of ``FairShares``: which request of which caller runs now, which waits, which is refused. A request asks
/// ``admit(_:)`` before its work and calls ``release(_:)`` after it; a freed place goes to the waiting callers in turn
/// — round robin over callers, each caller's own requests in order — so that a caller's share does not grow with its
/// connections. A caller alone — no other caller runs, or was admitted within ``sharingWindow`` — may take every place
/// (the server's work is not held back when nobody else wants it); one other caller's request brings it back to
/// ``FairShares/perCaller`` for the next admissions. Every decision is O(1) but for the turn, O(callers waiting) at
/// worst. Waiting ends when a place is given, or when the waiting task is cancelled (its client went away): then it
/// throws `CancellationError` and holds no place.
final class AdmissionQueue: Sendable {
    /// Why a request was not admitted.
    enum Refusal: Error, Equatable {
        /// Its caller has ``FairShares/perCallerQueue`` requests waiting already: 429.
        case callerQueueFull
        /// The server has ``FairShares/maxQueued`` requests waiting already: 503.
        case serverQueueFull
        /// Its caller passed ``FairShares/perCallerRate``: 429, with the seconds until it may start one again.
        case rateExceeded(retryAfter: Int)
    }

    /// How a request was admitted.
    enum Admission: Sendable, Equatable {
        /// At once: a place was free.
        case atOnce
        /// After waiting for a place.
        case afterWaiting
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Caller {
        var running = 0
        var waiting: [Waiter] = []
    }

    /// A caller's tokens for its rate: `tokens` at `time` (seconds on ``clock``), refilled at the rate, up to a burst.
    private struct Bucket {
        var tokens: Double
        var time: Double
    }

    private struct State {
        var running = 0
        var queued = 0
        var callers: [String: Caller] = [:]
        /// The callers with requests waiting, in the order their turns come.
        var turn: [String] = []
        var buckets: [String: Bucket] = [:]
        var nextID: UInt64 = 0
        /// The last admission (caller, seconds), and the last one of another caller than its.
        var latest: (caller: String, time: Double)?
        var latestOther: (caller: String, time: Double)?

        /// Whether `caller` has the server to itself: no other caller runs or waits, or was admitted lately.
        func isAlone(_ caller: String, at now: Double) -> Bool {
            guard running == (callers[caller]?.running ?? 0), queued == (callers[caller]?.waiting.count ?? 0) else {
                return false
            }
            let other = latest?.caller == caller ? latestOther : latest
            return other.map { now - $0.time >= AdmissionQueue.sharingWindow } ?? true
        }

        /// How many requests `caller` may run now.
        func bound(_ caller: String, _ shares: FairShares, at now: Double) -> Int {
            isAlone(caller, at: now) ? shares.maxRunning : shares.perCaller
        }

        /// Records that `caller` was given a place.
        mutating func admitted(_ caller: String, at now: Double) {
            if let latest, latest.caller != caller { latestOther = latest }
            latest = (caller, now)
        }
    }

    /// How long after another caller's admission a caller is no longer alone: seconds.
    static let sharingWindow = 1.0

    let shares: FairShares
    private let state = Locked(State())
    /// Seconds since some start, for the rate.
    private let clock: @Sendable () -> Double

    /// Creates the places of `shares`.
    ///
    /// - Parameters:
    ///   - shares: The bounds.
    ///   - clock: Seconds since some fixed start (tests pass their own).
    init(_ shares: FairShares, clock: (@Sendable () -> Double)? = nil) {
        self.shares = shares
        let start = ContinuousClock.now
        self.clock =
            clock ?? {
                let elapsed = ContinuousClock.now - start
                return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            }
    }

    /// How many requests run and wait now, every caller's together.
    var counts: (running: Int, queued: Int) { state.withLock { ($0.running, $0.queued) } }

    /// Waits for a place for a request of `caller`.
    ///
    /// - Returns: Whether it was given at once or after waiting; the caller then holds a place until ``release(_:)``.
    /// - Throws: ``Refusal`` when the request is refused; `CancellationError` when the task is cancelled while
    ///   waiting (no place is held then).
    func admit(_ caller: String) async throws -> Admission {
        if let refusal = takeToken(caller) { throw refusal }
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        var waited = false
        let now = clock()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let refusal: (any Error)? = state.withLock { state in
                    var entry = state.callers[caller] ?? Caller()
                    if state.running < shares.maxRunning, entry.running < state.bound(caller, shares, at: now),
                        entry.waiting.isEmpty
                    {
                        entry.running += 1
                        state.running += 1
                        state.callers[caller] = entry
                        state.admitted(caller, at: now)
                        return nil
                    }
                    if Task.isCancelled { return CancellationError() }
                    if entry.waiting.count >= shares.perCallerQueue { return Refusal.callerQueueFull }
                    if state.queued >= shares.maxQueued { return Refusal.serverQueueFull }
                    if entry.waiting.isEmpty { state.turn.append(caller) }
                    entry.waiting.append(Waiter(id: id, continuation: continuation))
                    state.callers[caller] = entry
                    state.queued += 1
                    waited = true
                    return nil
                }
                if let refusal {
                    continuation.resume(throwing: refusal)
                } else if !waited {
                    continuation.resume()
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> Waiter? in
                guard var entry = state.callers[caller], let index = entry.waiting.firstIndex(where: { $0.id == id })
                else { return nil }
                let waiter = entry.waiting.remove(at: index)
                state.queued -= 1
                if entry.waiting.isEmpty { state.turn.removeAll { $0 == caller } }
                Self.store(entry, of: caller, in: &state)
                return waiter
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
        return waited ? .afterWaiting : .atOnce
    }

    /// Gives back a place `caller` held, and hands the freed places to the waiting callers in turn.
    func release(_ caller: String) {
        let now = clock()
        let given = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            if var entry = state.callers[caller] {
                entry.running -= 1
                state.running -= 1
                Self.store(entry, of: caller, in: &state)
            }
            return Self.handOut(&state, shares, at: now)
        }
        for continuation in given { continuation.resume() }
    }

    /// Gives free places to waiting requests: each turn to the next caller that waits and is below its own bound.
    private static func handOut(_ state: inout State, _ shares: FairShares, at now: Double)
        -> [CheckedContinuation<Void, any Error>]
    {
        var given: [CheckedContinuation<Void, any Error>] = []
        while state.running < shares.maxRunning {
            // One pass over the turn at most: callers at their own bound keep their place in it.
            var next: Int?
            for (index, caller) in state.turn.enumerated()
            where (state.callers[caller]?.running ?? 0) < state.bound(caller, shares, at: now) {
                next = index
                break
            }
            guard let index = next else { break }
            let caller = state.turn.remove(at: index)
            guard var entry = state.callers[caller], !entry.waiting.isEmpty else { continue }
            given.append(entry.waiting.removeFirst().continuation)
            entry.running += 1
            state.running += 1
            state.queued -= 1
            if !entry.waiting.isEmpty { state.turn.append(caller) }
            state.callers[caller] = entry
            state.admitted(caller, at: now)
        }
        return given
    }

    /// Keeps `entry`, or forgets a caller that runs and waits for nothing (the table holds the active callers only).
    private static func store(_ entry: Caller, of caller: String, in state: inout State) {
        state.callers[caller] = entry.running == 0 && entry.waiting.isEmpty ? nil : entry
    }

    /// Takes one of `caller`'s tokens of ``FairShares/perCallerRate``, or says how long until one is there.
    private func takeToken(_ caller: String) -> Refusal? {
        guard let rate = shares.perCallerRate else { return nil }
        let burst = max(1, rate)
        let now = clock()
        return state.withLock { state in
            var bucket = state.buckets[caller] ?? Bucket(tokens: burst, time: now)
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.time) * rate)
            bucket.time = now
            guard bucket.tokens >= 1 else {
                state.buckets[caller] = bucket
                return .rateExceeded(retryAfter: max(1, Int(((1 - bucket.tokens) / rate).rounded(.up))))
            }
            bucket.tokens -= 1
            state.buckets[caller] = bucket
            // A full bucket is as good as none: past 10,000 callers, forget those.
            if state.buckets.count > 10_000 {
                state.buckets = state.buckets.filter { $0.value.tokens + (now - $0.value.time) * rate < burst }
            }
            return nil
        }
    }
}
