public import Foundation
public import SyncCore
import SyncSQLite

/// Where a client's sync stands: what waits to be sent, what waits for the user, what runs now, and how the
/// last sync ended. ``SyncClient/status()`` yields it whenever it changes.
public struct SyncStatus: Sendable, Equatable {
    /// Local changes not yet accepted by the server (refused ones included).
    public var pendingCount = 0
    /// Changes the server refused as conflicts, waiting for a resolution.
    public var conflictCount = 0
    /// Changes the server refused for another reason (a 400, a 403, …), waiting for a resolution.
    public var refusedCount = 0
    /// Whether a push runs now.
    public var isPushing = false
    /// The tables being pulled now.
    public var pullingTables: Set<TableName> = []
    /// The running pulls' progress, by table, as the last page left it.
    public var downloadProgress: [TableName: PullProgress] = [:]
    /// When a push or pull last ended with the server reached and nothing unsent for a failure of its own.
    public var lastSyncedAt: Date?
    /// Why the last push or pull stopped, until one succeeds.
    public var lastError: SyncStatusError?

    /// Whether a push or a pull runs now.
    public var isSyncing: Bool { isPushing || !pullingTables.isEmpty }

    /// A status with nothing pending and nothing running.
    public init() {}
}

/// Why a sync stopped, in the status.
public enum SyncStatusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server could not be reached or answered it is unavailable (5xx, timeouts); the changes wait.
    case unavailable(String)
    /// The server refused the credentials (401) even after a fresh token: the user must sign in again.
    case unauthorized
    /// Another failure (a refused query, the local store), in one line.
    case failed(String)

    /// One line.
    public var description: String {
        switch self {
        case .unavailable(let reason): "The server is unavailable: \(reason)"
        case .unauthorized: "Signed out: the server refused the credentials"
        case .failed(let reason): reason
        }
    }

    /// The status error of a push's or pull's failure; nil for a cancellation or refused operations (which the
    /// counts show).
    init?(_ error: any Error) {
        switch error {
        case PushError.serverUnavailable(let reason, _), PullError.serverUnavailable(let reason):
            self = .unavailable(reason.description)
        case PushError.unauthorized, PullError.unauthorized: self = .unauthorized
        case PushError.cancelled, PullError.cancelled, PushError.operationsFailed, is CancellationError: return nil
        default: self = .failed("\(error)")
        }
    }
}

/// What runs now and how the last sync ended, shared by a client's pushes and pulls; status streams wait on it.
final class SyncActivity: Sendable {
    private struct State {
        var pushes = 0
        var pulls: [TableName: Int] = [:]
        var progress: [TableName: PullProgress] = [:]
        var lastSyncedAt: Date?
        var lastError: SyncStatusError?
        var watchers: [UUID: AsyncStream<Void>.Continuation] = [:]
    }

    private let state = Locked(State())
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// Runs a push, marking it running and recording how it ended.
    func push<T>(_ body: () async throws -> T) async throws -> T {
        change { $0.pushes += 1 }
        do {
            let value = try await body()
            end({ $0.pushes -= 1 }, outcome: nil)
            return value
        } catch {
            end({ $0.pushes -= 1 }, outcome: error)
            throw error
        }
    }

    /// Runs a pull of `table`, marking it running with its progress and recording how it ended.
    func pull<T>(_ table: TableName, _ body: (@escaping @Sendable (PullProgress) -> Void) async throws -> T)
        async throws -> T
    {
        try await pull([table]) { report in try await body { report(table, $0) } }
    }

    /// Runs a pull of several tables together, marking them running with their progress and recording how it ended.
    func pull<T>(
        _ tables: [TableName], _ body: (@escaping @Sendable (TableName, PullProgress) -> Void) async throws -> T
    ) async throws -> T {
        change { state in
            for table in tables { state.pulls[table, default: 0] += 1 }
        }
        let finish = { @Sendable (state: inout State) in
            for table in tables {
                state.pulls[table, default: 1] -= 1
                if state.pulls[table] == 0 {
                    state.pulls[table] = nil
                    state.progress[table] = nil
                }
            }
        }
        do {
            let value = try await body { table, progress in self.change { $0.progress[table] = progress } }
            end(finish, outcome: nil)
            return value
        } catch {
            end(finish, outcome: error)
            throw error
        }
    }

    private func end(_ update: (inout State) -> Void, outcome error: (any Error)?) {
        let at = now()
        change { state in
            update(&state)
            if let error {
                switch error {
                case PushError.operationsFailed:  // the server was reached; the refusals show in the counts
                    state.lastSyncedAt = at
                    state.lastError = nil
                default:
                    if let failure = SyncStatusError(error) { state.lastError = failure }
                }
            } else {
                state.lastSyncedAt = at
                state.lastError = nil
            }
        }
    }

    private func change(_ update: (inout State) -> Void) {
        let watchers = state.withLock { state in
            update(&state)
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.yield() }
    }

    /// The activity part of a status.
    func apply(to status: inout SyncStatus) {
        state.withLock { state in
            status.isPushing = state.pushes > 0
            status.pullingTables = Set(state.pulls.keys)
            status.downloadProgress = state.progress
            status.lastSyncedAt = state.lastSyncedAt
            status.lastError = state.lastError
        }
    }

    /// A signal after every change, until the consumer stops.
    func changes() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        state.withLock { $0.watchers[id] = continuation }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.watchers.removeValue(forKey: id) }
        }
        return stream
    }
}

/// The counts a status reads from the store.
struct QueueCounts: Sendable, Equatable {
    var pending = 0
    var conflicts = 0
    var refused = 0

    static func read(_ reader: LocalStoreReader) throws -> QueueCounts {
        let errors = try reader.operationErrors()
        let conflicts = errors.filter(\.isConflict).count
        return QueueCounts(
            pending: try reader.operationCount(in: nil), conflicts: conflicts, refused: errors.count - conflicts)
    }
}

extension SyncClient {
    /// The client's sync status: yields the current one at once, then each time it changes — a local write or
    /// a resolution changes the counts (also from another client or process on the same store), a push or a
    /// pull starts, makes progress or ends.
    ///
    /// For example:
    /// ```swift
    /// for await status in client.status() {
    ///     badge = status.pendingCount
    ///     banner = status.lastError?.description
    /// }
    /// ```
    /// - Returns: The statuses. The sequence ends when the task iterating it is cancelled (or stops iterating).
    ///   When the store cannot be read, the counts stay as last read and `lastError` says why.
    public func status() -> AsyncStream<SyncStatus> {
        let store = self.store
        let activity = self.activity
        let (stream, continuation) = AsyncStream.makeStream(of: SyncStatus.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            // Nothing is yielded before the store's counts are known, so the first status is never a false zero.
            let latest = Locked(
                (counts: QueueCounts?.none, last: SyncStatus?.none, storeError: SyncStatusError?.none))
            let publish = { @Sendable in
                var status = SyncStatus()
                activity.apply(to: &status)
                let emitted: SyncStatus? = latest.withLock { latest in
                    guard let counts = latest.counts ?? (latest.storeError != nil ? QueueCounts() : nil) else {
                        return nil
                    }
                    status.pendingCount = counts.pending
                    status.conflictCount = counts.conflicts
                    status.refusedCount = counts.refused
                    if let storeError = latest.storeError { status.lastError = storeError }
                    guard status != latest.last else { return nil }
                    latest.last = status
                    return status
                }
                if let emitted { continuation.yield(emitted) }
            }
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        for try await value in store.observe([], QueueCounts.read) {
                            latest.withLock { $0.counts = value }
                            publish()
                        }
                    } catch {
                        latest.withLock { $0.storeError = .failed("\(error)") }
                        publish()
                    }
                }
                group.addTask {
                    publish()
                    for await _ in activity.changes() { publish() }
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

#if canImport(Observation)
    public import Observation

    /// A client's ``SyncStatus`` as an observable object, for SwiftUI and other Observation users.
    ///
    /// For example:
    /// ```swift
    /// struct StatusBar: View {
    ///     let model: SyncStatusModel
    ///     var body: some View {
    ///         Text("\(model.status.pendingCount) to send").task { await model.run() }
    ///     }
    /// }
    /// ```
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, visionOS 1, *)
    @MainActor @Observable
    public final class SyncStatusModel {
        /// The latest status (until ``run()`` runs, a status with nothing pending).
        public private(set) var status = SyncStatus()
        @ObservationIgnored private let client: SyncClient

        /// A model of `client`'s status; nothing is read until ``run()``.
        ///
        /// - Parameter client: The client.
        public init(client: SyncClient) {
            self.client = client
        }

        /// Keeps ``status`` current until the calling task is cancelled (SwiftUI's `.task` does).
        public func run() async {
            for await status in client.status() { self.status = status }
        }
    }
#endif
