import Foundation
import Logging
import SyncCore
import SyncOData

/// Pulls a table's pages into the store (PROTOCOL.md §5, §8), their sizes and pace as ``PullPacing`` decides, with the
/// caller's scope (``PullRunner/scopeChange(_:token:pulledBefore:)``), and purges.
struct PullRunner: SyncRunner {
    let parts: SyncParts
    /// The files of rows a pull or a purge deleted go with them.
    let attachments: AttachmentTransfers
}

extension PullRunner {
    /// One downloaded page.
    struct Page: Sendable {
        /// The rows, each with the JSON text it came in (stored as received).
        var items: [(value: JSONValue, text: String)]
        var isLast: Bool
        var totalCount: Int?
        /// The server's page size, when this page showed it is smaller than asked.
        var serverPageSize: Int?
        /// The `$top` the server refused (400) before it answered this page for a smaller one.
        var refusedTop: Int?
        /// Whether the server linked a next page: v2's `Link` header, v3's `nextLink`.
        var hasNextLink = false
        /// The caller's scope token on a scoped table's page (``scopeHeader``).
        var scopeToken: String?
        /// The table's horizon, on a page of a pull that changes alone cannot answer (``horizonHeader``).
        var horizon: WireDate?
        /// On the last page of a pull, a stamp every later write passes (``watermarkHeader``).
        var watermark: WireDate?
    }

    /// A page of a scoped table carried another scope token than the pull went by (``pullPages``): it is not used, and
    /// the pull goes on from the last page it applied or kept.
    struct ScopeMovedDuringPull: Error {}

    /// Pulls a table (PROTOCOL.md §5, §8): push first when the table has pending operations (refused
    /// operations do not stop the pull; an unavailable server, a 401 or a cancellation do); fetch the
    /// items marked to be fetched again; then keyset pages by `(updatedAt, id)`, each applied with
    /// its cursor in one transaction while the next page downloads. Pages start at `pageSize` rows and
    /// grow, up to `maxPageSize`, while the pull waits for the network rather than for the store. `push` is the
    /// client's push (``SyncContext/push()``, one at a time).
    func pull(
        _ table: TableName, filter: ODataExpression?, queryID: QueryID?, pageSize: Int, maxPageSize: Int,
        ahead: Bool, progress: (@Sendable (PullProgress) -> Void)?, push: () async throws -> PushResult
    ) async throws -> PullSummary {
        var summary = PullSummary(appliedCount: 0, skippedCount: 0, requestCount: 1)
        account.beginSync()
        try await stoppingAsPull {
            // What the pull starts from, in one read (each store access is a transaction on a reader's queue).
            var start = try await pullStart(table, queryID: queryID)
            if start.pendingCount > 0 {
                summary.pushErrors = try await pushFirst(push)
                start = try await pullStart(table, queryID: queryID)  // the push's resolutions may mark rows
            }
            try await refetch(start.refetch, in: table)
            var unstaged: StagedTable?
            var moves = 0
            var horizonMoves = 0
            while true {
                do {
                    try await pullPages(
                        table, filter: filter, queryID: queryID, start: start,
                        sizes: (pageSize, max(pageSize, maxPageSize)), ahead: ahead, progress, &summary,
                        staged: &unstaged, followsScope: moves < 3)
                    break
                } catch is ScopeMovedDuringPull {
                    // Goes on from the last page applied, whose cursor the store holds; the first page's token
                    // decides again. A scope that keeps moving: no token kept, so that the next pull lists it, and
                    // this one goes to the end without comparing the pages' tokens.
                    moves += 1
                    logger.info("Pull found the user's scope moved between pages: goes on from the last page applied")
                    if moves == 3 { try await store.write { try $0.setSetting(nil, for: Self.scopeKey(table)) } }
                    start = try await pullStart(table, queryID: queryID)
                } catch is HorizonMovedDuringPull {
                    // From the last page applied, whose first page lists again. A collector that keeps removing
                    // tombstones past the cursor: the pull stops there, its cursor before them, and the next lists.
                    horizonMoves += 1
                    guard horizonMoves < 3 else {
                        logger.warning("Pull stopped: the server kept removing tombstones past its cursor; sync again")
                        break
                    }
                    logger.info("Pull found tombstones removed between pages: goes on from the last page applied")
                    start = try await pullStart(table, queryID: queryID)
                }
            }
            let finished = WireDate(now()).description
            let holdsFiles = try await store.write { [account] writer in
                try account.confirm(in: writer)
                try writer.setSetting(finished, for: Self.lastPullKey(table))
                return try !writer.allAttachments().isEmpty
            }
            // The files of rows the pull deleted.
            if holdsFiles { try await attachments.removeUnnamedAttachments() }
        }
        return summary
    }

    /// The push before a pull: the operations it left refused, which do not stop the pull (PROTOCOL.md §8); an
    /// unavailable server, a 401 or a cancellation stop it (``SyncStop``).
    func pushFirst(_ push: () async throws -> PushResult) async throws -> [OperationError] {
        do {
            _ = try await push()
            return []
        } catch let error as PushError {
            switch error {
            case .operationsFailed(let result): return result.errors
            case .serverUnavailable(let reason, _): throw SyncStop.unavailable(reason)
            case .unauthorized: throw SyncStop.unauthorized
            case .cancelled: throw SyncStop.cancelled
            }
        }
    }

    /// Runs a pull's work, its ``SyncStop``s thrown as the ``PullError``s they are.
    func stoppingAsPull<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch SyncStop.unavailable(let error) {
            throw PullError.serverUnavailable(error)
        } catch SyncStop.unauthorized {
            throw PullError.unauthorized
        } catch SyncStop.cancelled {
            throw PullError.cancelled
        }
    }

    /// What a pull starts from: the table's pending operations, the items marked to be fetched again, the query's
    /// cursor and the page sizes learnt from the server.
    struct PullStart: Sendable {
        var pendingCount: Int
        var refetch: [ItemID]
        var cursor: PullCursor?
        var pageSize: Int?
        var topLimit: Int?
    }

    /// Reads ``PullStart`` in one store read.
    func pullStart(_ table: TableName, queryID: QueryID?) async throws -> PullStart {
        let (pageSizeKey, topLimitKey) = (Self.pageSizeKey(table), Self.topLimitKey(table))
        return try await store.read { reader in
            PullStart(
                pendingCount: try reader.operationCount(in: table), refetch: try reader.itemsToRefetch(in: table),
                cursor: try queryID.flatMap { try reader.cursor(for: table, queryID: $0) },
                pageSize: try reader.setting(pageSizeKey).flatMap { Int($0) },
                topLimit: try reader.setting(topLimitKey).flatMap { Int($0) })
        }
    }

    /// The pages of a pull. The first asks the count of matching rows too, so that the page that completes it
    /// is known to be the last (no request for an empty page). Pages grow while the pull waits longer for a page
    /// than the store takes to apply one — then each round trip, not the store, sets the pace, and bigger pages
    /// mean fewer of them (a 60 ms link pays 60 ms per page) — by the ratio of the two times. The first page is
    /// applied before the second is asked, so that the second is already sized by the link. Pages stop growing
    /// at `sizes.max`, at a page the server cut short (its page size), and at a `$top` the server refuses (its
    /// `maxTop`: the pull goes on with the largest size it took, remembered for the table's next pulls). Once
    /// they cannot grow and the network still sets the pace, each round trip carries two pages (`ahead`,
    /// ``prefetch(_:filter:after:pageSize:)``, ``join(_:_:size:)``). With `staged` (a pull of several tables together,
    /// ``pullTogether(_:pageSize:maxPageSize:ahead:passes:progress:push:)``), pages and scope changes are kept there
    /// instead, from its cursor on, for one transaction to apply them all.
    ///
    /// Every page must carry the token of the first (a scope that moved in between: ``ScopeMovedDuringPull``, thrown
    /// before the page is used). Without `followsScope` (a pull whose scope moved three times) pages are not compared and
    /// no token is kept, so that the next pull lists the scope again.
    func pullPages(
        _ table: TableName, filter: ODataExpression?, queryID: QueryID?, start: PullStart,
        sizes: (first: Int, max: Int), ahead: Bool, _ progress: (@Sendable (PullProgress) -> Void)?,
        _ summary: inout PullSummary, staged: inout StagedTable?, followsScope: Bool = true
    ) async throws {
        var pull = PagedPull(
            table: table, filter: filter, queryID: queryID, followsScope: followsScope, logger: logger,
            pacing: PullPacing(
                first: sizes.first, max: sizes.max, remembered: start.pageSize, topLimit: start.topLimit, ahead: ahead))
        pull.log.debug("Pull started")
        // The pace compares real durations (the network's, the store's): measured on the continuous clock, not on
        // the injected one, which decides only how long a retry waits (a test's ImmediateClock measures nothing).
        let clock = ContinuousClock()
        let sinceStart = clock.stopwatch()
        var page = try await firstPage(
            &pull, cursor: staged.map(\.cursor) ?? start.cursor, listingSize: sizes.max, since: sinceStart, &summary,
            staged: &staged)
        let total = page.totalCount
        var received = 0
        var lastApply: Duration?
        while !page.items.isEmpty {
            let items = page.items
            let last = try Self.cursor(of: items[items.count - 1].value)
            received += items.count
            // The server's count says when this page is the last, unless rows changed meanwhile (then the
            // page after tells, as without a count; a row changed after the count waits for the next pull).
            let isLast = page.isLast || total.map { received >= $0 } == true
            // The first page is applied before the next is asked, to size that one by the two times.
            let applied = lastApply == nil && !isLast ? try await placeFirst(items, &pull, cursor: last, &staged) : nil
            let (nextSize, fallback) = (pull.pacing.size, pull.pacing.accepted)
            async let next: Page? =
                isLast
                ? nil : fetch(table, filter: filter, after: last, pageSize: nextSize, fallback: fallback, count: false)
            // Pages as large as they may be, and still the network sets the pace: the page after the next is asked
            // at the same time, so that two pages share each round trip — unless the count says the next is the last.
            let ahead = pull.pacing.asksAhead(isLast: isLast, received: received, total: total)
            async let afterNext: Page? = ahead ? prefetch(table, filter: filter, after: last, pageSize: nextSize) : nil
            let done: (count: Int, skipped: Int, time: Duration)
            if let applied {
                done = applied
            } else {
                done = try await place(items, to: table, cursor: last, queryID: queryID, staged: &staged)
            }
            lastApply = done.time
            summary.appliedCount += done.count
            summary.skippedCount += done.skipped
            progress?(PullProgress(appliedCount: received, totalCount: total))
            let waiting = clock.stopwatch()
            guard let following = try await next else { break }
            let second: Page?? = ahead ? .some(await afterNext) : .none
            page = try arrived(
                following, second, &pull, asked: nextSize, waited: waiting(), applyTime: done.time, &summary)
            try await paced(by: page, &pull, asked: nextSize, applyTime: done.time)
        }
        if let watermark = page.watermark { try await advance(pull, to: watermark, staged: &staged) }
        pull.log.debug(
            "Pull finished",
            metadata: [SyncLogKey.rows: "\(summary.appliedCount)", SyncLogKey.pages: "\(summary.requestCount)"])
    }

    /// The next page and the one after it as one, when they are contiguous: the next page is full (`size` rows,
    /// not cut by the server) and the second's first row is its last row, in the same version. Since rows
    /// never appear behind rows already visible (PROTOCOL.md §5: a changed or new row sorts after every row
    /// seen), a row that moved out of the next page's range between the two requests would have shifted the
    /// second by one; so the shared row proves no row fell between them. nil otherwise.
    static func join(_ next: Page, _ second: Page, size: Int) throws -> Page? {
        guard next.items.count == size, next.serverPageSize == nil, next.refusedTop == nil, !next.isLast,
            let last = next.items.last, let first = second.items.first,
            try cursor(of: last.value) == cursor(of: first.value),
            last.value["version"] == first.value["version"]
        else { return nil }
        return Page(items: next.items + second.items.dropFirst(), isLast: second.isLast)
    }

    /// Applies a page as ``apply(_:to:cursor:queryID:)`` does, or keeps it in `staged`, and times it.
    func place(
        _ items: [(value: JSONValue, text: String)], to table: TableName, cursor: PullCursor, queryID: QueryID?,
        staged: inout StagedTable?
    ) async throws -> (count: Int, skipped: Int, time: Duration) {
        let time = ContinuousClock().stopwatch()
        if staged != nil {
            staged?.keep(items, cursor: cursor)
            return (0, 0, time())
        }
        let (applied, skipped) = try await apply(items, to: table, cursor: cursor, queryID: queryID)
        return (applied, skipped, time())
    }

    /// The setting that holds when a table's last pull finished.
    static func lastPullKey(_ table: TableName) -> String { "lastPull.\(table.canonical)" }

    /// The setting that remembers a server's smaller page size for a table.
    static func pageSizeKey(_ table: TableName) -> String { "pageSize.\(table.canonical)" }

    /// The setting that remembers the largest `$top` a table's server took, once it refused a larger one.
    static func topLimitKey(_ table: TableName) -> String { "topLimit.\(table.canonical)" }

    /// Applies one page and its cursor in one transaction; rows with pending operations are skipped,
    /// and rows the store already has in that version are left alone.
    ///
    /// - Returns: The rows that changed the store, and those skipped.
    func apply(_ items: [(value: JSONValue, text: String)], to table: TableName, cursor: PullCursor, queryID: QueryID?)
        async throws
        -> (applied: Int, skipped: Int)
    {
        try await store.write { [account] writer in
            try account.confirm(in: writer)  // not a page of an account signed out meanwhile
            let counts = try Self.store(items, in: table, writer: writer)
            if let queryID { try writer.setCursor(cursor, for: table, queryID: queryID) }
            return counts
        }
    }

    /// Stores pulled rows in `writer`'s transaction: rows with pending operations are skipped, and rows the store
    /// already has in that version are left alone. The files the stored rows name in the table's attachment fields
    /// are noted to be fetched ahead (``AttachmentTransfers/prefetchAttachments(in:)``).
    ///
    /// - Returns: The rows that changed the store, and those skipped.
    static func store(
        _ items: some Sequence<(value: JSONValue, text: String)>, in table: TableName, writer: LocalStoreWriter
    ) throws -> (applied: Int, skipped: Int) {
        let pending = try writer.itemIDsWithOperations(in: table)
        let rows = try writer.pulledRows(in: table)
        var fileFields: [String]?  // read at the first row stored
        var files: [String] = []
        var (applied, skipped) = (0, 0)
        for (item, text) in items {
            guard let id = item.itemID else { continue }
            if pending.contains(id) {  // by bytes: another normalization of the id is another row
                skipped += 1
                continue
            }
            let changed =
                item.isDeleted
                ? try rows.remove(id)
                : try rows.store(
                    id, version: item["version"]?.stringValue, updatedAt: item["updatedAt"]?.stringValue, text: text)
            guard changed else { continue }
            applied += 1
            if !item.isDeleted {
                let fields = try fileFields ?? writer.attachmentFields(of: table)
                fileFields = fields
                // A page keeps only the system properties parsed (``page(of:wire:)``): the row's text names its files.
                if !fields.isEmpty {
                    let row = try JSONValue(parsing: text)
                    files += fields.compactMap { row[$0]?.stringValue }.filter(Attachment.isHash)
                }
            }
        }
        try writer.noteFilesToFetch(files, in: table)
        return (applied, skipped)
    }

    /// Clears a table's rows, or those matching `filter` (PROTOCOL.md §8). Forced with a filter, the
    /// items whose dropped operations leave a local row (or dropped a delete) are marked to be fetched
    /// again, so the device does not keep changes the server never got.
    func purge(_ table: TableName, filter: ODataExpression?, queryID: QueryID?, mode: PurgeMode) async throws {
        try await store.write { writer in
            let dropped = try writer.operations(after: nil, limit: nil).filter { $0.table.canonical == table.canonical }
            if !dropped.isEmpty {
                guard mode == .evenIfPending else { throw PurgeError(table: table, pendingCount: dropped.count) }
                try writer.removeOperations(in: table)
            }
            try writer.deleteItems(in: table, matching: filter)
            if filter == nil {
                try writer.removeCursors(in: table)
            } else {
                for operation in dropped {
                    guard try operation.kind == .delete || writer.containsItem(operation.itemID, in: table) else {
                        continue
                    }
                    try writer.markForRefetch(operation.itemID, in: table)
                }
                if let queryID { try writer.setCursor(nil, for: table, queryID: queryID) }
            }
        }
        try await attachments.removeUnnamedAttachments()
    }
}
