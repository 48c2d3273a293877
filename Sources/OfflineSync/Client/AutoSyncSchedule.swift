/// When the automatic sync syncs, waits and stops — as a value: the loop tells it what happened (a trigger, how a
/// sync ended, whether the network came back during a wait) and does what it answers, on the injected clock. No I/O
/// and no clock, so every sequence of events can be tested without a server.
///
/// - A local change waits ``AutoSyncOptions/pushDelay`` for more writes, then pushes; any other trigger pushes and
///   pulls.
/// - While offline, or stopped by a 401 or another account's token, a trigger syncs nothing; ``resume`` (after a
///   new sign-in) lifts the stop.
/// - A server that is unavailable is tried again after a backoff (``AutoSyncOptions/initialBackoff`` doubling to
///   ``AutoSyncOptions/maximumBackoff``), pushing and pulling; the network coming back ends the wait and the
///   backoff. A `networkBack` trigger that the retry it woke has already served syncs nothing more.
struct AutoSyncSchedule: Sendable {
    /// What asks for a sync.
    enum Trigger: Sendable, Equatable {
        case localChange, schedule, now, resume, serverChange, networkBack
    }

    /// How a sync ended.
    enum Outcome: Sendable, Equatable {
        case done, unavailable, unauthorized, otherAccount
    }

    /// What the loop does next.
    enum Action: Sendable, Equatable {
        /// Nothing: wait for the next trigger.
        case idle
        /// Sync — push, and pull too when `pulls` — after waiting `settle` (a burst of local writes).
        case sync(pulls: Bool, settle: Duration?)
        /// Wait `backoff` (or until the network comes back), then sync with pulls.
        case retry(after: Duration)
    }

    private var backoff: Backoff
    private let pushDelay: Duration
    /// Stopped by a 401 or another account's token, until resumed.
    private(set) var stopped = false
    /// How often the network had come back when the last sync began.
    private var lastSyncSaw: UInt64?

    /// A schedule with `options`' delays.
    init(_ options: AutoSyncOptions) {
        backoff = Backoff(initial: options.initialBackoff, maximum: options.maximumBackoff)
        pushDelay = options.pushDelay
    }

    /// A trigger arrived.
    ///
    /// - Parameters:
    ///   - trigger: What asks for a sync.
    ///   - offline: Whether the network is unusable now.
    ///   - networkBackCount: How often the network has come back so far.
    /// - Returns: ``Action/idle`` or ``Action/sync(pulls:settle:)`` (after a settling wait, the loop asks
    ///   ``maySync(offline:)`` again).
    mutating func received(_ trigger: Trigger, offline: Bool, networkBackCount: UInt64) -> Action {
        switch trigger {
        case .resume: stopped = false
        case .networkBack:
            if lastSyncSaw == networkBackCount { return .idle }  // the retry it woke has synced already
            backoff.reset()
        case .localChange:
            return .sync(pulls: false, settle: pushDelay)  // ``maySync(offline:)`` after the wait decides
        case .schedule, .now, .serverChange: break
        }
        return maySync(offline: offline) ? .sync(pulls: true, settle: nil) : .idle
    }

    /// Whether a sync may start now: not while offline (the network's return asks again) nor while stopped.
    func maySync(offline: Bool) -> Bool { !stopped && !offline }

    /// A sync begins, `networkBackCount` times after the network came back.
    mutating func syncStarts(networkBackCount: UInt64) { lastSyncSaw = networkBackCount }

    /// A sync ended.
    ///
    /// - Parameters:
    ///   - outcome: How.
    ///   - offline: Whether the network is unusable now (then the network's return, not a backoff, asks again).
    /// - Returns: ``Action/idle`` or ``Action/retry(after:)``.
    mutating func synced(_ outcome: Outcome, offline: Bool) -> Action {
        switch outcome {
        case .done:
            backoff.reset()
            return .idle
        case .unauthorized, .otherAccount:
            stopped = true
            return .idle
        case .unavailable:
            return offline ? .idle : .retry(after: backoff.next())
        }
    }

    /// A retry's wait ended; `networkCameBack` when the network's return ended it.
    mutating func waited(networkCameBack: Bool) {
        if networkCameBack { backoff.reset() }
    }
}
