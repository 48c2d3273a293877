import Foundation

/// How the server shares itself between callers (docs/fairness.md): each caller — the token's subject, or without one
/// the client's address — runs at most ``perCaller`` requests at once, and the server at most ``maxRunning``; the rest
/// wait, and a freed place goes to the waiting callers in turn (round robin), so that a caller with many connections
/// gets no more than one with few while both wait. A caller with ``perCallerQueue`` requests waiting is answered 429,
/// the server with ``maxQueued`` waiting 503 — both with `Retry-After` — before the request is read: a request the
/// server started is never dropped. `/health`, `/ready`, `/metrics` and the change feed's held `GET /changes` pass
/// without a share.
///
/// For example, a server whose callers are many small devices and a few busy services:
/// ```swift
/// var configuration = SyncServerConfiguration()
/// configuration.fairShares.perCaller = 2
/// configuration.fairShares.perCallerRate = 50  // requests a second, in bursts of 50
/// ```
public struct FairShares: Sendable, Hashable {
    /// Whether requests are admitted by caller at all. Default true.
    public var isOn = true
    /// The most requests of one caller running at once. Default: twice the processor count, at least 4.
    public var perCaller: Int
    /// The most requests of one caller waiting for a place; one more is answered 429. Default 256.
    public var perCallerQueue = 256
    /// The most requests running at once, every caller's together. Default: 8 per processor, at least 16.
    public var maxRunning: Int
    /// The most requests waiting, every caller's together; one more is answered 503. Default 4,096.
    public var maxQueued = 4_096
    /// The most requests a second one caller may start, in bursts of as many (at least 1); more are answered 429
    /// with the wait. nil (the default): no rate.
    public var perCallerRate: Double?

    /// The defaults, sized by the processors this process may use.
    public init() {
        let processors = ProcessInfo.processInfo.activeProcessorCount
        perCaller = max(4, 2 * processors)
        maxRunning = max(16, 8 * processors)
    }

    /// Each bound at least 1, and the rate above 0.
    ///
    /// - Throws: ``ConfigurationError`` naming the setting.
    public func validate() throws {
        for (value, name) in [
            (perCaller, "perCaller"), (perCallerQueue, "perCallerQueue"), (maxRunning, "maxRunning"),
            (maxQueued, "maxQueued"),
        ] where value < 1 {
            throw ConfigurationError("fairShares.\(name) must be at least 1")
        }
        if let perCallerRate, !(perCallerRate > 0) || !perCallerRate.isFinite {
            throw ConfigurationError("fairShares.perCallerRate must be a number of requests a second above 0")
        }
    }
}
