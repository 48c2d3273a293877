public import SyncCore
import SyncOData

/// One table of a pull of several together (``SyncClient/pullTogether(_:passes:progress:)``), made by
/// ``SyncTable/pulling(_:queryID:)``.
public struct TablePull: Sendable {
    let table: TableName
    let filter: ODataExpression?
    let queryID: QueryID?
    /// Records the table's attachment fields before the pull.
    let before: @Sendable () async throws -> Void
    /// Downloads the table's files after the pull, when its attachment policy says so.
    let after: @Sendable () async throws -> Void
}

extension SyncTable {
    /// This table and a query, for a pull of several tables together (``SyncClient/pullTogether(_:passes:progress:)``).
    ///
    /// - Parameters:
    ///   - query: The rows to pull.
    ///   - queryID: Names the incremental pull, as for ``pull(_:queryID:progress:)``; nil pulls every matching row.
    /// - Returns: The table's part of the pull.
    /// - Throws: `ValueError` for a key path that names no field.
    public func pulling(_ query: TableQuery<Item> = TableQuery(), queryID: QueryID? = nil) throws -> TablePull {
        let filter = try query.checked().filter
        return TablePull(
            table: name, filter: filter, queryID: queryID, before: { try await recordAttachmentFields() },
            after: { try await prefetchAfterPull() })
    }
}

extension SyncClient {
    /// Pulls several tables so that the device never shows part of a change set (``changeSet(_:)``) the server
    /// applied whole — a list without its owner's member row, an order without its lines — across pages and across
    /// these tables. docs/consistency.md states the guarantee and where it ends.
    ///
    /// It pushes first when any of the tables has pending operations (as ``SyncTable/pull(_:queryID:progress:)``
    /// does), then pulls each table in turn, pass after pass from where the last ended, until a pass in which no table
    /// has anything new, and applies every row and scope change it received in one local transaction. So when the
    /// first pass brings rows it costs a request per table more than separate pulls (the pass that finds nothing; a
    /// pull with nothing new makes one pass), holds what it received in memory until the end, and shows nothing before:
    /// use it for tables that share sets, and a plain pull for a large first download. Items with pending operations
    /// are skipped, as by any pull.
    ///
    /// For example:
    /// ```swift
    /// let summary = try await client.pullTogether([
    ///     try members.pulling(queryID: "allMembers"), try lists.pulling(queryID: "allLists"),
    /// ])
    /// ```
    /// - Parameters:
    ///   - pulls: The tables and their queries, each table once.
    ///   - passes: The most passes; when writes did not pause for that many, nothing received is applied (a set could be
    ///     half in it) and ``JointPullSummary/isWhole`` says so: the tables keep what they showed until a later pull.
    ///   - progress: Called as pages arrive, with the table and the rows received of it so far.
    /// - Returns: Each table's summary, the passes, and whether every set is whole.
    /// - Throws: ``PullError`` as ``SyncTable/pull(_:queryID:progress:)`` does; then nothing received was applied
    ///   (rows fetched again for resolved conflicts excepted) and the cursors are where they were. `ValueError` for a
    ///   table named twice. Cancellation ends it with ``PullError/cancelled``, applying nothing.
    @discardableResult
    public func pullTogether(
        _ pulls: [TablePull], passes: Int = 4, progress: (@Sendable (TableName, PullProgress) -> Void)? = nil
    ) async throws -> JointPullSummary {
        guard Set(pulls.map(\.table.canonical)).count == pulls.count else {
            throw ValueError(kind: "pull", reason: "each table may be pulled together only once")
        }
        guard !pulls.isEmpty else { return JointPullSummary(tables: [], passes: 0, isWhole: true) }
        for pull in pulls { try await pull.before() }
        let configuration = self.configuration
        let summary = try await activity.pull(pulls.map(\.table)) { report in
            try await context.puller.pullTogether(
                pulls.map { ($0.table, $0.filter, $0.queryID) }, pageSize: configuration.pullPageSize,
                maxPageSize: configuration.maxPullPageSize, ahead: configuration.pullsAhead, passes: passes,
                progress: { table, page in
                    report(table, page)
                    progress?(table, page)
                }, push: context.push)
        }
        for pull in pulls { try await pull.after() }
        return summary
    }
}
