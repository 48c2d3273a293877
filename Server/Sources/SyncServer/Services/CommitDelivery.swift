import Logging
import ServiceLifecycle
import SyncCore

/// Delivers the outbox's committed writes to the tables' ``TableHooks/afterCommit`` hooks, in batches, oldest first:
/// a write leaves the outbox only after its hook returned, so every committed write reaches its hook at least once —
/// across crashes and restarts (it stays in the outbox), a hook that throws (delivered again once its lease ends,
/// ``SyncServerConfiguration/afterCommitLease``) and several instances (each takes writes the others do not hold).
///
/// It runs as a service, from when the tables are ready until graceful shutdown; a delivery cut short by the
/// shutdown is delivered again after the restart.
final class CommitDelivery: Service {
    let store: any TableStore
    /// The tables with a hook — their names as configured, and their hooks — by canonical name.
    let hooks: [String: (table: TableName, hook: TableHooks.AfterCommit)]
    let lease: Duration
    let logger: Logger
    /// Opens once the tables are ready.
    private let ready = ReadyGate()

    static let batchSize = 200
    /// How often an empty outbox is looked at again (writes of other instances land there too).
    static let idlePoll = Duration.milliseconds(200)

    init(
        store: any TableStore, hooks: [String: (table: TableName, hook: TableHooks.AfterCommit)], lease: Duration,
        logger: Logger
    ) {
        self.store = store
        self.hooks = hooks
        self.lease = lease
        self.logger = logger
    }

    /// Lets deliveries start: the store's tables, and its outbox, are ready.
    func start() {
        ready.open()
    }

    func run() async {
        await cancelWhenGracefulShutdown {
            await self.ready.wait()
            await self.deliver()
        }
    }

    /// Delivers until cancelled; a failure (the store's or a hook's) waits 1 s, doubling up to 30 s.
    func deliver() async {
        var failures = 0
        while !Task.isCancelled {
            do {
                let (writes, failed) = try await deliverBatch()
                if failed {
                    failures += 1
                } else {
                    failures = 0
                    if writes == Self.batchSize { continue }
                }
            } catch {
                failures += 1
                logger.warning("Committed writes could not be taken from the outbox: \(error); trying again")
            }
            let pause = failures == 0 ? Self.idlePoll : .seconds(min(30, 1 << min(failures - 1, 5)))
            try? await Task.sleep(for: pause)
        }
    }

    /// Takes one batch, runs its hooks in order until one throws, and removes the writes delivered.
    ///
    /// - Returns: How many writes the batch had, and whether a hook threw.
    func deliverBatch() async throws -> (writes: Int, failed: Bool) {
        let writes = try await store.leaseCommits(limit: Self.batchSize, for: lease)
        var delivered: [Int64] = []
        var failed = false
        for write in writes {
            if Task.isCancelled { break }
            guard let (table, hook) = hooks[write.table.canonical] else {
                logger.notice("Dropping a committed write of \(write.table) from the outbox: the table has no hook")
                delivered.append(write.sequence)
                continue
            }
            do {
                try await hook(
                    CommittedWrite(sequence: write.sequence, kind: write.kind, table: table, item: write.item))
                delivered.append(write.sequence)
            } catch {
                logger.error(
                    "The after-commit hook of \(write.table) failed for \(write.id ?? "?") (\(write.kind.rawValue)): \(error); it runs again in \(lease.components.seconds) s"
                )
                failed = true
                break
            }
        }
        try await store.removeCommits(delivered)
        return (writes.count, failed)
    }
}
