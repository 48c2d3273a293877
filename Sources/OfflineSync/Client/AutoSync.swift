import Foundation
import Logging
import SyncCore
import SyncOData
import SyncSQLite

/// How ``SyncClient/startSyncing(pulling:options:)`` syncs by itself.
public struct AutoSyncOptions: Sendable {
    /// How long after a local write the push waits for more writes, so that a burst (the writes of one user
    /// action) is pushed once. Default 0.1 s.
    public var pushDelay = Duration.milliseconds(100)
    /// How often the tables are pulled when nothing else asks for it. Default 60 s.
    public var pullInterval = Duration.seconds(60)
    /// The first wait after the server was unavailable; it doubles up to ``maximumBackoff``. Default 1 s.
    public var initialBackoff = Duration.seconds(1)
    /// The longest wait between tries while the server is unavailable. Default 5 minutes.
    public var maximumBackoff = Duration.seconds(300)
    /// Whether the network is reachable: while it is not, nothing is sent; when it is again, the sync runs at
    /// once. Default: the system's network path (`PathMonitorReachability`) on Apple platforms; none
    /// elsewhere, where the backoff alone paces the retries.
    public var reachability: (any NetworkReachability)?

    /// The defaults.
    public init() {
        #if canImport(Network)
            reachability = PathMonitorReachability()
        #endif
    }
}

/// One pull the automatic sync runs: a table with its query, pulled incrementally under its query id.
public struct AutoSyncPull: Sendable {
    /// The table pulled (of tables pulled together, the first).
    public let table: TableName
    /// Every table pulled: several for a pull together (``SyncClient/autoPull(together:passes:)``).
    let tables: [TableName]
    let run: @Sendable () async throws -> Void

    init(table: TableName, tables: [TableName]? = nil, run: @escaping @Sendable () async throws -> Void) {
        (self.table, self.tables, self.run) = (table, tables ?? [table], run)
    }
}

extension SyncClient {
    /// Tables the automatic sync pulls together (``pullTogether(_:passes:progress:)``), so that it never shows part of
    /// a change set they share (see ``startSyncing(pulling:options:)``).
    ///
    /// - Parameters:
    ///   - pulls: The tables and their queries (``SyncTable/pulling(_:queryID:)``); at least one.
    ///   - passes: As for ``pullTogether(_:passes:progress:)``.
    /// - Returns: The pull.
    /// - Throws: `ValueError` for no table, or a table named twice.
    public func autoPull(together pulls: [TablePull], passes: Int = 4) throws -> AutoSyncPull {
        guard let first = pulls.first else { throw ValueError(kind: "pull", reason: "name at least one table") }
        guard Set(pulls.map(\.table.canonical)).count == pulls.count else {
            throw ValueError(kind: "pull", reason: "each table may be pulled together only once")
        }
        return AutoSyncPull(table: first.table, tables: pulls.map(\.table)) {
            _ = try await self.pullTogether(pulls, passes: passes)
        }
    }
}

extension SyncTable {
    /// This table as the automatic sync pulls it (see ``SyncClient/startSyncing(pulling:options:)``).
    ///
    /// - Parameters:
    ///   - query: The rows to pull; all by default.
    ///   - queryID: The incremental pull's id; by default `auto-` and the table's name.
    /// - Returns: The pull.
    public func autoPull(_ query: TableQuery<Item> = TableQuery(), queryID: QueryID? = nil) -> AutoSyncPull {
        let id = queryID ?? QueryID(rawValue: "auto-\(name.canonical)")
        return AutoSyncPull(table: name) { _ = try await self.pull(query, queryID: id) }
    }
}

/// The automatic sync of one client: a single loop, so two syncs never run at once. It pushes soon after local
/// writes, pulls on a schedule, when asked and when the server says a pulled table changed (`GET /changes`),
/// waits with backoff while the server is unavailable, and stops trying after a 401, or a token for another
/// account than the store's (``AccountError``), until ``SyncClient/resumeSyncing()``.
final class AutoSyncer: Sendable {
    private typealias Trigger = AutoSyncSchedule.Trigger

    /// What the loop and the change follower share: whether a 401 stopped them, whether the network is
    /// reachable, and the wakeup that ends their waits when it is again.
    private struct Shared: Sendable {
        let signedOut = Locked(false)  // after a 401, until resumed: no request at all
        let reachability: (any NetworkReachability)?
        let networkBack = Wakeup()

        var offline: Bool { reachability.map { !$0.isReachable } ?? false }
    }

    private let task: Task<Void, Never>
    private let triggers: AsyncStream<Trigger>.Continuation

    init(client: SyncClient, pulls: [AutoSyncPull], options: AutoSyncOptions) {
        let (stream, triggers) = AsyncStream.makeStream(of: Trigger.self, bufferingPolicy: .bufferingNewest(8))
        self.triggers = triggers
        let logger = client.configuration.logger
        let clock = client.configuration.clock
        let shared = Shared(reachability: options.reachability)
        task = Task {
            await withTaskGroup(of: Void.self) { group in
                if let reachability = options.reachability {
                    group.addTask {
                        // Each usable network after the first — back from offline, or a new path (Wi-Fi to
                        // cellular; changes that came too fast to be seen one by one) — ends the waits.
                        var first = true
                        for await reachable in reachability.updates() {
                            defer { first = false }
                            guard reachable, !first else { continue }
                            logger.info("Automatic sync: the network is usable (again, or by a new path)")
                            shared.networkBack.fire()
                            triggers.yield(.networkBack)
                        }
                    }
                }
                // Local writes: the pending count going up.
                group.addTask {
                    var last = 0
                    do {
                        for try await count in client.store.observe([], { try $0.operationCount(in: nil) }) {
                            if count > last { triggers.yield(.localChange) }
                            last = count
                        }
                    } catch {}
                }
                group.addTask {
                    while !Task.isCancelled {
                        triggers.yield(.schedule)
                        do { try await clock.sleep(for: options.pullInterval) } catch { return }
                    }
                }
                group.addTask {
                    await Self.followChanges(
                        client, tables: pulls.flatMap(\.tables), triggers: triggers, shared: shared, logger: logger)
                }
                // The loop ends only when stopped; the helpers above (one may end early: a server without change
                // notifications) are cancelled with it.
                await Self.loop(client, pulls, options, stream, shared: shared, logger: logger)
                group.cancelAll()
            }
        }
    }

    /// Asks for a sync (push, then every pull) as soon as the loop is free.
    func syncNow() { triggers.yield(.now) }

    /// Lets the loop try again after a 401 (a new token is available).
    func resume() { triggers.yield(.resume) }

    /// Stops the loop; a sync running now is cancelled (what it applied is kept).
    func stop() async {
        triggers.finish()
        task.cancel()
        await task.value
    }

    private static func loop(
        _ client: SyncClient, _ pulls: [AutoSyncPull], _ options: AutoSyncOptions, _ stream: AsyncStream<Trigger>,
        shared: Shared, logger: Logger
    ) async {
        let clock = client.configuration.clock
        var schedule = AutoSyncSchedule(options)
        for await trigger in stream {
            if Task.isCancelled { return }
            let action = schedule.received(trigger, offline: shared.offline, networkBackCount: shared.networkBack.count)
            shared.signedOut.withLock { $0 = schedule.stopped }  // the change follower pauses too
            guard case .sync(var pullsToo, let settle) = action else { continue }
            if let settle {
                // Let a burst of writes settle, then push them together — unless offline or stopped by then (the
                // network's return asks for a sync).
                try? await clock.sleep(for: settle)
                if !schedule.maySync(offline: shared.offline) { continue }
            }
            while !Task.isCancelled {
                let seen = shared.networkBack.count
                schedule.syncStarts(networkBackCount: seen)
                let outcome = await sync(client, pulls: pullsToo ? pulls : [], logger: logger)
                switch outcome {
                case .unauthorized: logger.notice("Automatic sync stopped: the server refused the credentials (401)")
                case .otherAccount:
                    logger.notice("Automatic sync stopped: the token is not for the account whose data the store holds")
                case .done, .unavailable: break
                }
                let next = schedule.synced(outcome, offline: shared.offline)
                shared.signedOut.withLock { $0 = schedule.stopped }
                guard case .retry(let wait) = next else { break }
                logger.info("Automatic sync: the server is unavailable; trying again in \(wait)")
                // The network coming back ends the wait early.
                await shared.networkBack.sleep(for: wait, clock: clock, after: seen)
                if Task.isCancelled { return }
                schedule.waited(networkCameBack: shared.networkBack.count != seen)
                pullsToo = true
            }
        }
    }

    /// Follows the server's change notifications (`GET /changes`, docs/changes.md) and asks for a sync when a
    /// pulled table changed. Ends for a server without them (404, 405): the schedule alone pulls then.
    private static func followChanges(
        _ client: SyncClient, tables: [TableName], triggers: AsyncStream<Trigger>.Continuation,
        shared: Shared, logger: Logger
    ) async {
        guard !tables.isEmpty else { return }
        let clock = client.configuration.clock
        // The server holds the request; it must answer before the transport gives up.
        let timeout = client.configuration.requestTimeout
        let wait = max(0, min(20, timeout.components.seconds - 5))
        var token: String?
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(30))
        while !Task.isCancelled {
            // Signed out: no request until resumed; offline: none until the network is back.
            while shared.signedOut.withLock({ $0 }) || shared.offline {
                await shared.networkBack.sleep(for: .milliseconds(500), clock: clock, after: shared.networkBack.count)
                if Task.isCancelled { return }
            }
            let seen = shared.networkBack.count
            var query = "tables=" + tables.map(\.rawValue).joined(separator: ",") + "&wait=\(wait)"
            if let token { query += "&since=" + ODataQuery.percentEncode(token) }
            var url = client.url.absoluteString
            if url.hasSuffix("/") { url.removeLast() }
            do {
                // Signed out while the request was being prepared (a token asked for, a slow machine): not sent.
                let response = try await client.endpoint.send(
                    "GET", URL(string: url + "/changes?" + query) ?? client.url, features: [],
                    stillWanted: { !shared.signedOut.withLock { $0 } })
                switch response.status {
                case 200:
                    let body = try? JSONValue(parsing: response.body)
                    let changed = body?["changed"]?.arrayValue ?? []
                    if token != nil, !changed.isEmpty { triggers.yield(.serverChange) }
                    token = body?["token"]?.stringValue
                    backoff.reset()
                    continue
                case 404, 405:
                    logger.info("The server sends no change notifications; pulling on the schedule")
                    return
                case 401:
                    // The loop's sync meets the 401 too, says so in the status, and stops both until resumed.
                    triggers.yield(.now)
                default:
                    break
                }
            } catch {
                if Task.isCancelled { return }
            }
            await shared.networkBack.sleep(for: backoff.next(), clock: clock, after: seen)
            if Task.isCancelled { return }
            if shared.networkBack.count != seen { backoff.reset() }
        }
    }

    private typealias Outcome = AutoSyncSchedule.Outcome

    /// One sync: a push when changes wait, then each pull (which pushes its table's changes first).
    private static func sync(_ client: SyncClient, pulls: [AutoSyncPull], logger: Logger) async -> Outcome {
        do {
            if try await client.store.read({ try $0.operationCount(in: nil) }) > 0 { try await client.push() }
            for pull in pulls { try await pull.run() }
            return .done
        } catch PushError.operationsFailed {
            // Refused changes wait for the user; the rest went through.
            for pull in pulls { if let outcome = await pullAfterRefusals(pull) { return outcome } }
            return .done
        } catch PushError.unauthorized, PullError.unauthorized {
            return .unauthorized
        } catch PushError.serverUnavailable, PullError.serverUnavailable {
            return .unavailable
        } catch is AccountError {
            return .otherAccount
        } catch {
            logger.warning("Automatic sync failed", metadata: ["sync.error": "\(error)"])
            return .done
        }
    }

    private static func pullAfterRefusals(_ pull: AutoSyncPull) async -> Outcome? {
        do {
            try await pull.run()
            return nil
        } catch PullError.unauthorized {
            return .unauthorized
        } catch PullError.serverUnavailable {
            return .unavailable
        } catch is AccountError {
            return .otherAccount
        } catch {
            return nil
        }
    }
}

extension SyncClient {
    /// Syncs by itself until ``stopSyncing()``: pushes soon after local writes (waiting
    /// ``AutoSyncOptions/pushDelay`` for more), pulls `pulling` at once, every ``AutoSyncOptions/pullInterval``
    /// and as soon as the server says one of them changed (sync-server's `GET /changes`; other backends are
    /// pulled on the schedule alone), retries with backoff while the server is unavailable, sends nothing while
    /// ``AutoSyncOptions/reachability`` says the network is gone and syncs at once when it is back, and after a
    /// 401 (or a token for another account than the store's: ``AccountError``) stops trying until
    /// ``resumeSyncing()``. ``signOut(pending:)`` stops it. One sync runs at a time. ``status()`` shows what it does.
    /// Starting again replaces the previous automatic sync.
    ///
    /// For example:
    /// ```swift
    /// await client.startSyncing(pulling: [todos.autoPull()])
    /// ```
    /// - Parameters:
    ///   - pulls: The tables to keep pulled.
    ///   - options: Delays and intervals.
    public func startSyncing(pulling pulls: [AutoSyncPull], options: AutoSyncOptions = AutoSyncOptions()) async {
        let previous = autoSyncer.withLock { current in
            defer { current = AutoSyncer(client: self, pulls: pulls, options: options) }
            return current
        }
        await previous?.stop()
    }

    /// Stops the automatic sync; a sync running now is cancelled (what it applied is kept, and unsent changes
    /// stay queued). Does nothing when it is not running.
    public func stopSyncing() async {
        await autoSyncer.withLock { current in
            defer { current = nil }; return current
        }?.stop()
    }

    /// Asks the automatic sync to push and pull now (for example when the network comes back, or on a
    /// pull-to-refresh). Does nothing when it is not running.
    public func syncNow() {
        autoSyncer.withLock { $0 }?.syncNow()
    }

    /// Lets the automatic sync try again after it stopped on a 401: call it once a new token is available.
    public func resumeSyncing() {
        autoSyncer.withLock { $0 }?.resume()
    }
}

/// Wakes the tasks that wait for it each time it fires: the automatic sync's waits end early when the network
/// comes back.
final class Wakeup: Sendable {
    private struct State {
        var fired: UInt64 = 0
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Locked(State())

    /// How many times it fired, to wait for the next time after that.
    var count: UInt64 { state.withLock { $0.fired } }

    /// Wakes every waiter.
    func fire() {
        let woken = state.withLock { state in
            state.fired += 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Waits for `duration` on `clock`, or less: until it fires after `seen` (at once if it has), or the task
    /// is cancelled.
    func sleep(for duration: Duration, clock: any Clock<Duration>, after seen: UInt64) async {
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let waiting = self.state.withLock { state in
                            guard state.fired == seen, !Task.isCancelled else { return false }
                            state.waiters[id] = continuation
                            return true
                        }
                        if !waiting { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
                }
            }
            group.addTask { try? await clock.sleep(for: duration) }
            await group.next()
            group.cancelAll()
        }
    }
}
