import Logging
import SyncCore
import SyncOData

/// Tombstones the server removed (issue 66, docs/retention.md): a server may keep a deleted row's tombstone only for a
/// while. A pull whose cursor is older than a removed tombstone — a device offline longer than the retention — would
/// never hear of that delete, so the server answers its pages with the table's horizon (the `X-Sync-Horizon` header:
/// the newest `updatedAt` among the tombstones removed). The device then lists the ids the server holds in the pull's
/// query and scope, removes the local rows of that query the server no longer has (not those with pending operations:
/// their push meets the row's absence as it meets a delete — a conflict for an update, done for a delete — and a pending
/// insert is sent as ever), keeps the horizon it reconciled with, and goes on incrementally from its cursor. The removal
/// and the horizon kept are one transaction: a pull killed before it left the table as it was, and the next pull lists
/// again; one killed after it does not list again for the same horizon.
extension PullRunner {
    /// The response header that carries the table's horizon.
    static let horizonHeader = "X-Sync-Horizon"
    /// The response header of a pull's last page that carries a stamp every later write passes.
    static let watermarkHeader = "X-Sync-Watermark"

    /// A page of a pull carried a newer horizon than the pull reconciled with: tombstones it may not have seen were
    /// removed meanwhile. The page is not used (its rows would move the cursor past the server's telling); the pull
    /// goes on from the last page it applied or kept, and lists again — or, the third time, stops there, and the next
    /// pull lists.
    struct HorizonMovedDuringPull: Error {}

    /// The setting that holds the horizon a query's rows were last reconciled with: per query id, or per filter for a
    /// pull without one.
    static func horizonKey(_ table: TableName, queryID: QueryID?, filter: ODataExpression?) -> String {
        let query = queryID.map { "id:\($0.rawValue)" } ?? "filter:\(filter?.odataText ?? "")"
        return "horizon.\(table.canonical).\(query)"
    }

    /// The horizon the pull's rows were reconciled with: the one a pull of several tables together has kept to store,
    /// else the store's.
    func reconciledHorizon(_ pull: PagedPull, staged: StagedHorizon?) async throws -> WireDate? {
        if let staged { return staged.horizon }
        let key = Self.horizonKey(pull.table, queryID: pull.queryID, filter: pull.filter)
        return try await store.read { try $0.setting(key) }.flatMap(WireDate.init(parsing:))
    }

    /// Whether `page` says tombstones the query's rows were not reconciled with are gone.
    func isBehind(_ page: Page, reconciled: WireDate?) -> Bool {
        guard let horizon = page.horizon else { return false }
        return reconciled.map { $0 < horizon } ?? true
    }

    /// Moves the query's cursor to `watermark` once the pull has read its last page (the server's word that every
    /// write after that page passes it), when that is ahead: a query that sees no change stays ahead of the horizon,
    /// so that a device that syncs within the retention never lists. In `staged`, where the next pass starts.
    func advance(_ pull: PagedPull, to watermark: WireDate, staged: inout StagedTable?) async throws {
        let cursor = PullCursor(updatedAt: watermark, itemID: nil)
        if staged != nil {
            if staged?.cursor.map({ $0.updatedAt < watermark }) ?? true { staged?.cursor = cursor }
            return
        }
        guard let queryID = pull.queryID else { return }
        try await store.write { [account, table = pull.table] writer in
            try account.confirm(in: writer)
            try writer.setCursor(cursor, for: table, queryID: queryID)  // never moves back
        }
    }

    /// Lists the ids the server holds in the pull's query and scope, and removes the query's other local rows but
    /// those with pending operations, keeping `horizon` as reconciled — in one transaction; or, with `staged` (a pull
    /// of several tables together), keeps the listing there for the pull's transaction (and drops the rows its earlier
    /// passes kept that the server no longer has).
    ///
    /// - Returns: How many rows were removed (0 when staged: ``StagedHorizon/settle(in:writer:)`` says), and the
    ///   requests the listing took.
    func reconcileHorizon(
        _ pull: PagedPull, horizon: WireDate, pageSize: Int, staged: inout StagedTable?
    ) async throws -> (removed: Int, requests: Int) {
        let key = Self.horizonKey(pull.table, queryID: pull.queryID, filter: pull.filter)
        if staged == nil {
            // A device holding none of the query's rows (a first download) has nothing to check: no listing.
            let holdsNone = try await store.write { [account, table = pull.table, filter = pull.filter] writer in
                try account.confirm(in: writer)
                guard try writer.count(in: table, matching: filter) == 0 else { return false }
                try writer.setSetting(horizon.description, for: key)
                return true
            }
            if holdsNone { return (0, 0) }
        }
        let (ids, requests) = try await listIDs(
            pull.table, filter: pull.filter, pageSize: pageSize, fallback: pull.pacing.accepted)
        let listing = StagedHorizon(ids: ids, filter: pull.filter, horizon: horizon, key: key)
        if let held = staged {
            staged?.horizon = listing
            staged?.rows = held.rows.filter { ids.contains($0.key) }
            pull.log.info("Pull of several tables found tombstones removed: the listing is applied with the rows")
            return (0, requests)
        }
        let removed = try await store.write { [account] writer in
            try account.confirm(in: writer)
            return try listing.settle(in: pull.table, writer: writer)
        }
        pull.log.info(
            "Pull found tombstones removed since its cursor: rows the server no longer has removed",
            metadata: [SyncLogKey.rows: "\(removed)", SyncLogKey.pages: "\(requests)"])
        return (removed, requests)
    }
}

/// The ids a listing after removed tombstones found (``PullRunner/reconcileHorizon(_:horizon:pageSize:staged:)``),
/// and what the store keeps of it.
struct StagedHorizon: Sendable {
    var ids: Set<ItemID>
    /// The pull's query: the local rows it matches are the ones checked.
    var filter: ODataExpression?
    /// The horizon the listing reconciles with.
    var horizon: WireDate
    /// The setting that keeps it (``PullRunner/horizonKey(_:queryID:filter:)``).
    var key: String

    /// Removes the local rows matching the query that the listing lacks (not those with pending operations), and keeps
    /// the horizon, in `writer`'s transaction.
    ///
    /// - Returns: How many rows were removed.
    func settle(in table: TableName, writer: LocalStoreWriter) throws -> Int {
        let pending = try writer.itemIDsWithOperations(in: table)
        let removed = try writer.removeItems(in: table, notIn: ids, sparing: pending, matching: filter)
        try writer.setSetting(horizon.description, for: key)
        return removed
    }
}
