import Foundation
import Logging
import ServiceLifecycle
import SyncCore
import SyncOData

/// Removes the attachments no row names once they are older than the grace period
/// (``AttachmentSettings/gracePeriod``), and the uploads left unfinished as long: when the server starts, then every
/// ``AttachmentSettings/collectionInterval``, until graceful shutdown. A row keeps its files while it exists, deleted
/// (a tombstone may be brought back) or not; several instances collecting at once remove each file once.
final class AttachmentCollector: Service {
    let attachments: any AttachmentStore
    let tables: any TableStore
    let configurations: [TableConfiguration]
    let settings: AttachmentSettings
    let now: @Sendable () -> Date
    let logger: Logger
    /// Opens once the tables are ready.
    private let ready = ReadyGate()

    init(
        attachments: any AttachmentStore, tables: any TableStore, configuration: SyncServerConfiguration
    ) {
        self.attachments = attachments
        self.tables = tables
        configurations = configuration.servedTables.filter { !$0.attachmentColumns.isEmpty }
        settings = configuration.attachments
        now = configuration.now
        logger = configuration.logger
    }

    /// Lets collections start: the tables are ready.
    func start() {
        ready.open()
    }

    func run() async {
        await ready.repeating(every: settings.collectionInterval, logger: logger, "Collecting attachments") {
            try await self.collect()
        }
    }

    /// One collection.
    ///
    /// - Returns: What it removed.
    @discardableResult
    func collect() async throws -> CollectionCount {
        let cutoff = now().addingTimeInterval(-Double(settings.gracePeriod.components.seconds))
        let count = try await attachments.collect(before: cutoff) { hash in try await self.isNamed(hash) }
        if count != CollectionCount() {
            logger.info(
                "Collected \(count.files) attachments no row names (\(count.bytes) bytes) and \(count.uploads) unfinished uploads"
            )
        }
        return count
    }

    /// Whether any row of any table, deleted or not, names `hash`.
    func isNamed(_ hash: AttachmentHash) async throws -> Bool {
        for configuration in configurations {
            let query = Self.query(naming: hash, in: configuration, includeDeleted: true)
            let page = try await tables.query(
                configuration.name, query, scope: .everything, limit: 1, maxBytes: 1 << 16)
            if page.itemCount > 0 { return true }
        }
        return false
    }

    /// The query of the rows of a table that name `hash` in one of its attachment columns, their ids only.
    static func query(naming hash: AttachmentHash, in configuration: TableConfiguration, includeDeleted: Bool)
        -> ODataQuery
    {
        var query = ODataQuery()
        query.filter = configuration.attachmentColumns.map {
            ODataExpression.binary(.eq, .member($0), .literal(.string(hash.hex)))
        }.reduce(nil) { filter, next in filter.map { .binary(.or, $0, next) } ?? next }
        query.select = [SystemProperty.id.rawValue]
        query.includeDeleted = includeDeleted
        return query
    }
}
