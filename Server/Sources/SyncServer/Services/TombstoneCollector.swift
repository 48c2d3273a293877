import Foundation
import Logging
import Metrics
import ServiceLifecycle
import SyncCore

/// Removes the tombstones older than their table's ``TableConfiguration/tombstoneRetention``: when the server starts,
/// then every ``interval``, until graceful shutdown. Each table goes in batches of ``batchSize``, each batch a short
/// transaction of its own with a pause after it, so that writers and readers never wait long behind it; on PostgreSQL,
/// one instance removes at a time (``TableStore/removeTombstones(of:before:limit:)``). A row's files go with the
/// collection of unnamed attachments (``AttachmentCollector``) once no row names them.
final class TombstoneCollector: Service {
    let tables: any TableStore
    /// The tables with a retention.
    let retained: [(name: TableName, retention: Duration)]
    let now: @Sendable () -> Date
    let logger: Logger
    /// How often each instance collects: a tenth of the shortest retention, between 1 second and 10 minutes.
    let interval: Duration
    /// The most tombstones one transaction removes.
    let batchSize: Int
    private let ready = ReadyGate()

    /// A collector of the configured tables' tombstones, `batchSize` at a time, or nil when no table has a retention.
    init?(tables: any TableStore, configuration: SyncServerConfiguration, batchSize: Int = 1_000) {
        retained = configuration.servedTables.compactMap { table in
            table.tombstoneRetention.map { (table.name, $0) }
        }
        guard let shortest = retained.map(\.retention).min() else { return nil }
        self.tables = tables
        self.batchSize = batchSize
        now = configuration.now
        logger = configuration.logger
        interval = min(max(shortest / 10, .seconds(1)), .seconds(600))
    }

    /// Lets collections start: the tables are ready.
    func start() {
        ready.open()
    }

    func run() async {
        await ready.repeating(every: interval, logger: logger, "Removing tombstones") { try await self.collect() }
    }

    /// One collection of every table with a retention.
    ///
    /// - Returns: How many tombstones it removed.
    /// - Throws: ``TableStoreError`` from the store; cancellation stops between batches.
    @discardableResult
    func collect() async throws -> Int {
        var total = 0
        for (table, retention) in retained {
            var removed = 0
            var removal = TombstoneRemoval(removed: 0, horizon: nil)
            repeat {
                try Task.checkCancellation()
                removal = try await tables.removeTombstones(
                    of: table, olderThan: retention, at: now(), limit: batchSize)
                removed += removal.removed
                if removal.removed > 0 { try? await Task.sleep(for: .milliseconds(5)) }  // others' turn
            } while removal.removed >= batchSize
            guard removed > 0 else { continue }
            Counter(label: Self.removedLabel, dimensions: [(MetricLabel.table, table.canonical)]).increment(by: removed)
            logger.info(
                "Removed \(removed) tombstones of \(table) older than \(retention.components.seconds) s; horizon \(removal.horizon.map { "\($0)" } ?? "none")"
            )
            total += removed
        }
        return total
    }

    /// The counter of removed tombstones, per table.
    static let removedLabel = "sync.tombstones.removed"
}
