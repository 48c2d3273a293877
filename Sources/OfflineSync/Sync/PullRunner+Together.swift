import Foundation
import Logging
import SyncCore
import SyncOData

/// A pull of several tables together (issue 49): what the app shows never holds part of a change set that the server
/// applied whole, across pages and across the tables pulled.
///
/// Each table's server stamps order that table only, so no one request reads several tables at one position. The pull
/// reaches one instead: it keeps every page in memory (``StagedTable``) and pulls each table in turn, pass after pass,
/// each pass from where the last ended, until a pass in which every table answers nothing new. Then it applies all it
/// kept, with the scope changes it found, in one local transaction. Why that is whole: a set that committed before that
/// last pass's first request was visible to every request of the pass, so its rows were kept (in that pass, which found
/// none, or before it); a set that committed during the pass would have shown in the request of a table that came
/// after its commit, which found none — so no set committed during it; and rows of a set that committed after it were
/// not asked for. It rests on the server's order (PROTOCOL.md §5: a row written later sorts after every row seen), and
/// needs the server to apply sets atomically. When writes never pause for `passes` passes, the pull applies nothing and
/// says so (``JointPullSummary/isWhole``): what it holds mixes the tables' states at different times, so a set could be
/// half in it.
extension PullRunner {
    /// One table of a pull of several together: where its query is and what it received since the pull began.
    struct StagedTable: Sendable {
        /// The rows received, the latest of each item.
        var rows: [ItemID: (value: JSONValue, text: String)] = [:]
        /// After the last row received: where the next pass starts.
        var cursor: PullCursor?
        /// The scope change found, to apply before the rows.
        var scope: StagedScope?
        /// The listing after removed tombstones, to apply before the rows.
        var horizon: StagedHorizon?
        /// Rows received in all passes.
        var received = 0

        /// Keeps a page's rows, each replacing what an earlier page had of its item.
        mutating func keep(_ items: [(value: JSONValue, text: String)], cursor: PullCursor) {
            for item in items {
                guard let id = item.value.itemID else { continue }
                rows[id] = item
            }
            received += items.count
            self.cursor = cursor
        }
    }

    /// Pulls several tables so that they show every change set whole, as this extension's overview says: the implicit
    /// push first (once, when any of them has pending operations), then passes until one finds nothing new (at most
    /// `passes`), then one transaction.
    func pullTogether(
        _ pulls: [JointPull], pageSize: Int, maxPageSize: Int, ahead: Bool, passes: Int,
        progress: @escaping @Sendable (TableName, PullProgress) -> Void, push: () async throws -> PushResult
    ) async throws -> JointPullSummary {
        var summaries = pulls.map { _ in PullSummary(appliedCount: 0, skippedCount: 0, requestCount: 0) }
        var (passCount, isWhole) = (0, false)
        account.beginSync()
        try await stoppingAsPull {
            var starts: [PullStart] = []
            for pull in pulls { starts.append(try await pullStart(pull.table, queryID: pull.queryID)) }
            if starts.contains(where: { $0.pendingCount > 0 }) {
                summaries[0].pushErrors = try await pushFirst(push)
                starts = []
                for pull in pulls { starts.append(try await pullStart(pull.table, queryID: pull.queryID)) }
            }
            for (pull, start) in zip(pulls, starts) { try await refetch(start.refetch, in: pull.table) }
            var staged: [StagedTable?] = starts.map { StagedTable(cursor: $0.cursor) }
            while passCount < max(passes, 1), !isWhole {
                passCount += 1
                let received = try await pass(
                    pulls, starts: starts, sizes: (pageSize, max(pageSize, maxPageSize)), ahead: ahead,
                    progress: progress, summaries: &summaries, staged: &staged)
                isWhole = received == 0
            }
            guard isWhole else {
                logger.warning(
                    "Pull of several tables applied nothing: writes did not pause",
                    metadata: [SyncLogKey.pages: "\(passCount)"])
                for index in summaries.indices {
                    (summaries[index].appliedCount, summaries[index].skippedCount) = (0, 0)
                }
                return
            }
            try await apply(staged, of: pulls, summaries: &summaries)
        }
        return JointPullSummary(
            tables: zip(pulls, summaries).map { .init(table: $0.table, summary: $1) }, passes: passCount,
            isWhole: isWhole)
    }

    /// One table of a pull of several together: the table, its query and the name of its incremental pull.
    typealias JointPull = (table: TableName, filter: ODataExpression?, queryID: QueryID?)

    /// One pass: each table's pages from where its last pass ended, kept in `staged`.
    ///
    /// - Returns: How many rows the pass received (a scope that moved under it counts as one: the next pass goes on
    ///   from the last page kept, and decides the scope again).
    private func pass(
        _ pulls: [JointPull], starts: [PullStart], sizes: (Int, Int), ahead: Bool,
        progress: @escaping @Sendable (TableName, PullProgress) -> Void, summaries: inout [PullSummary],
        staged: inout [StagedTable?]
    ) async throws -> Int {
        var received = 0
        for index in pulls.indices {
            let (table, filter, queryID) = pulls[index]
            let before = staged[index]?.received ?? 0
            summaries[index].requestCount += 1
            do {
                try await pullPages(
                    table, filter: filter, queryID: queryID, start: starts[index], sizes: sizes, ahead: ahead,
                    { progress(table, $0) }, &summaries[index], staged: &staged[index])
            } catch is ScopeMovedDuringPull {
                received += 1
            } catch is HorizonMovedDuringPull {
                received += 1
            }
            received += (staged[index]?.received ?? 0) - before
        }
        return received
    }

    /// Applies what the passes kept, every table's scope change, rows and cursor, in one local transaction.
    private func apply(_ staged: [StagedTable?], of pulls: [JointPull], summaries: inout [PullSummary]) async throws {
        let finished = WireDate(now()).description
        let (counts, holdsFiles) = try await store.write { [account] writer in
            try account.confirm(in: writer)
            var counts: [(applied: Int, skipped: Int, removed: Int, reconciled: Int)] = []
            for (pull, table) in zip(pulls, staged) {
                let table = table ?? StagedTable()  // every table has one: the passes never clear it
                let removed = try table.scope?.settle(in: pull.table, writer: writer) ?? 0
                let reconciled = try table.horizon?.settle(in: pull.table, writer: writer) ?? 0
                let (applied, skipped) = try Self.store(table.rows.values, in: pull.table, writer: writer)
                if let queryID = pull.queryID, let cursor = table.cursor {
                    try writer.setCursor(cursor, for: pull.table, queryID: queryID)
                }
                try writer.setSetting(finished, for: Self.lastPullKey(pull.table))
                counts.append((applied, skipped, removed, reconciled))
            }
            return (counts, try !writer.allAttachments().isEmpty)
        }
        for (index, count) in counts.enumerated() {
            summaries[index].appliedCount = count.applied
            summaries[index].skippedCount = count.skipped
            summaries[index].removedCount = count.removed
            summaries[index].reconciledCount = count.reconciled
        }
        if holdsFiles { try await attachments.removeUnnamedAttachments() }
    }
}

/// The ids a listing of a user's scope found (``PullRunner/reconcileScope(_:_:pageSize:_:staged:)``), and what the
/// store keeps of it.
struct StagedScope: Sendable {
    var ids: Set<ItemID>
    /// The token to keep: nil when the listing's pages disagreed (the next pull checks again).
    var token: String?
    /// Whether every query of the table starts over.
    var restarted: Bool

    /// Removes the table's rows out of the scope (not those with pending operations), forgets its cursors when it
    /// restarted, and keeps the token, in `writer`'s transaction.
    ///
    /// - Returns: How many rows were removed.
    func settle(in table: TableName, writer: LocalStoreWriter) throws -> Int {
        let pending = try writer.itemIDsWithOperations(in: table)
        let removed = try writer.removeItems(in: table, notIn: ids, sparing: pending)
        if restarted { try writer.removeCursors(in: table) }
        try writer.setSetting(token, for: PullRunner.scopeKey(table))
        return removed
    }
}
