import Foundation
import Logging
import SyncCore

extension SyncContext {
    /// One downloaded page.
    struct Page: Sendable {
        /// The rows, each with the JSON text it came in (stored as received).
        var items: [(value: JSONValue, text: String)]
        var isLast: Bool
        var totalCount: Int?
    }

    /// Pulls a table (PROTOCOL.md §5): push first when the table has pending operations; then keyset
    /// pages by `(updatedAt, id)`, each applied with its cursor in one transaction while the next
    /// page downloads.
    func pull(
        _ table: TableName, filter: ODataExpression?, queryID: QueryID?, pageSize: Int,
        progress: (@Sendable (PullProgress) -> Void)?
    ) async throws -> PullSummary {
        if try await store.read({ try $0.operationCount(in: table) }) > 0 {
            do { _ = try await push() } catch let error as PushError { throw PullError.pushFailed(error) }
        }
        var cursor: PullCursor?
        if let queryID { cursor = try await store.read { try $0.cursor(for: table, queryID: queryID) } }
        var summary = PullSummary(appliedCount: 0, skippedCount: 0, requestCount: 1)
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        log.debug("Pull started")
        var page = try await fetch(table, filter: filter, after: cursor, pageSize: pageSize, count: progress != nil)
        let total = page.totalCount
        while !page.items.isEmpty {
            let items = page.items
            let last = try Self.cursor(of: items[items.count - 1].value)
            let isLast = page.isLast
            async let next: Page? =
                isLast ? nil : fetch(table, filter: filter, after: last, pageSize: pageSize, count: false)
            let (applied, skipped) = try await apply(items, to: table, cursor: last, queryID: queryID)
            summary.appliedCount += applied
            summary.skippedCount += skipped
            progress?(PullProgress(appliedCount: summary.appliedCount + summary.skippedCount, totalCount: total))
            cursor = last
            guard let following = try await next else { break }
            summary.requestCount += 1
            page = following
        }
        log.debug(
            "Pull finished",
            metadata: [SyncLogKey.rows: "\(summary.appliedCount)", SyncLogKey.pages: "\(summary.requestCount)"])
        return summary
    }

    /// What a pull reads from each row; the rest is stored as the text that arrived.
    static let pulledFields: Set<String> = ["id", "updatedAt", "deleted"]

    static func cursor(of item: JSONValue) throws -> PullCursor {
        guard let id = item.itemID else { throw PullError.invalidRow("a row has no valid id") }
        guard let updatedAt = item.updatedAt else { throw PullError.invalidRow("row \(id) has no updatedAt") }
        return PullCursor(updatedAt: updatedAt, itemID: id)
    }

    /// Downloads the page after `cursor`.
    func fetch(_ table: TableName, filter: ODataExpression?, after cursor: PullCursor?, pageSize: Int, count: Bool)
        async throws -> Page
    {
        var query = ODataQuery(
            filter: filter, orderBy: [ODataOrdering("updatedAt"), ODataOrdering("id")], top: pageSize)
        query.includeDeleted = true
        query.includeTotalCount = count
        if let cursor {
            let updatedAt = ODataExpression.member("updatedAt")
            let stamp = ODataExpression.literal(.date(cursor.updatedAt, .datetimeoffset))
            let after = ODataExpression.binary(
                .or, .binary(.gt, updatedAt, stamp),
                .binary(
                    .and, .binary(.eq, updatedAt, stamp),
                    .binary(.gt, .member("id"), .literal(.string(cursor.itemID.rawValue)))))
            query.filter = filter.map { .binary(.and, $0, after) } ?? after
        }
        let features = cursor == nil ? ["TQ", "OL"] : ["TQ", "OL", "IP"]
        let url = endpoint.url(table, query: query.queryString)
        var attempt = 0
        var response: HTTPResponseData
        while true {
            attempt += 1
            do {
                response = try await endpoint.send("GET", url, features: features)
                if !RetryPolicy.isTransient(status: response.status) || attempt > retry.limit { break }
            } catch let error as TransportError {
                if error.code == .cancelled || attempt > retry.limit { throw PullError.networkUnavailable(error) }
            }
            let delay = retryDelay(attempt: attempt, jitter: retry.jitter())
            logger.info(
                "Pull retrying a page", metadata: [SyncLogKey.table: "\(table)", SyncLogKey.attempt: "\(attempt)"])
            try await retry.clock.sleep(for: delay)
        }
        guard response.status == 200 else {
            throw PullError.rejected(status: response.status, message: response.message)
        }
        let items: [(value: JSONValue, text: String)]
        var totalCount: Int?
        if let elements = try? JSONValue.parseArrayElements(response.body, keeping: Self.pulledFields) {
            items = elements
        } else if let body = response.json, let results = body["results"]?.arrayValue {  // with $inlinecount
            items = results.map { ($0, $0.serialized()) }
            totalCount = body["count"]?.intValue.map(Int.init)
        } else {
            throw PullError.rejected(status: response.status, message: "the body is not a list of items")
        }
        let hasLink = response.header("Link") != nil
        return Page(items: items, isLast: items.count < pageSize && !hasLink, totalCount: totalCount)
    }

    /// Applies one page and its cursor in one transaction; rows with pending operations are skipped.
    func apply(_ items: [(value: JSONValue, text: String)], to table: TableName, cursor: PullCursor, queryID: QueryID?)
        async throws
        -> (applied: Int, skipped: Int)
    {
        try await store.write { writer in
            let pending = try writer.itemIDsWithOperations(in: table)
            var (applied, skipped) = (0, 0)
            for (item, text) in items {
                guard let id = item.itemID else { continue }
                if pending.contains(id.rawValue) {
                    skipped += 1
                    continue
                }
                if item.isDeleted {
                    try writer.deleteItem(id, in: table)
                } else {
                    try writer.upsert(item, text: text, in: table)
                }
                applied += 1
            }
            if let queryID { try writer.setCursor(cursor, for: table, queryID: queryID) }
            return (applied, skipped)
        }
    }

    /// Clears a table's rows, or those matching `filter` (PROTOCOL.md §8).
    func purge(_ table: TableName, filter: ODataExpression?, queryID: QueryID?, mode: PurgeMode) async throws {
        try await store.write { writer in
            let pending = try writer.operationCount(in: table)
            if pending > 0 {
                guard mode == .evenIfPending else { throw PurgeError(table: table, pendingCount: pending) }
                try writer.removeOperations(in: table)
            }
            try writer.deleteItems(in: table, matching: filter)
            if filter == nil {
                try writer.removeCursors(in: table)
            } else if let queryID {
                try writer.setCursor(nil, for: table, queryID: queryID)
            }
        }
    }
}
