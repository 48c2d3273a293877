import Foundation
import Logging
import SyncCore
import SyncOData

extension SyncContext {
    /// One downloaded page.
    struct Page: Sendable {
        /// The rows, each with the JSON text it came in (stored as received).
        var items: [(value: JSONValue, text: String)]
        var isLast: Bool
        var totalCount: Int?
        /// The server's page size, when this page showed it is smaller than asked.
        var serverPageSize: Int?
    }

    /// Pulls a table (PROTOCOL.md §5, §8): push first when the table has pending operations (refused
    /// operations do not stop the pull; an unavailable server, a 401 or a cancellation do); fetch the
    /// items marked to be fetched again; then keyset pages by `(updatedAt, id)`, each applied with
    /// its cursor in one transaction while the next page downloads.
    func pull(
        _ table: TableName, filter: ODataExpression?, queryID: QueryID?, pageSize: Int,
        progress: (@Sendable (PullProgress) -> Void)?
    ) async throws -> PullSummary {
        var summary = PullSummary(appliedCount: 0, skippedCount: 0, requestCount: 1)
        do {
            if try await store.read({ try $0.operationCount(in: table) }) > 0 {
                do {
                    _ = try await push()
                } catch let error as PushError {
                    switch error {
                    case .operationsFailed(let result): summary.pushErrors = result.errors
                    case .serverUnavailable(let reason, _): throw SyncStop.unavailable(reason)
                    case .unauthorized: throw SyncStop.unauthorized
                    case .cancelled: throw SyncStop.cancelled
                    }
                }
            }
            try await refetchMarked(in: table)
            try await pullPages(table, filter: filter, queryID: queryID, pageSize: pageSize, progress, &summary)
            let finished = WireDate(now()).description
            try await store.write { try $0.setSetting(finished, for: Self.lastPullKey(table)) }
        } catch SyncStop.unavailable(let error) {
            throw PullError.serverUnavailable(error)
        } catch SyncStop.unauthorized {
            throw PullError.unauthorized
        } catch SyncStop.cancelled {
            throw PullError.cancelled
        }
        return summary
    }

    private func pullPages(
        _ table: TableName, filter: ODataExpression?, queryID: QueryID?, pageSize: Int,
        _ progress: (@Sendable (PullProgress) -> Void)?, _ summary: inout PullSummary
    ) async throws {
        var cursor: PullCursor?
        let key = Self.pageSizeKey(table)
        let (stored, remembered) = try await store.read { reader in
            (try queryID.flatMap { try reader.cursor(for: table, queryID: $0) }, try reader.setting(key))
        }
        cursor = stored
        var size = min(pageSize, remembered.flatMap { Int($0) } ?? pageSize)
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        log.debug("Pull started")
        var page = try await fetch(table, filter: filter, after: cursor, pageSize: size, count: progress != nil)
        if let serverSize = page.serverPageSize, serverSize < size {
            size = serverSize
            log.info("Pull follows the server's page size", metadata: [SyncLogKey.pageSize: "\(size)"])
            try await store.write { [size] in try $0.setSetting(String(size), for: key) }
        }
        let total = page.totalCount
        let nextSize = size
        var received = 0
        while !page.items.isEmpty {
            let items = page.items
            let last = try Self.cursor(of: items[items.count - 1].value)
            let isLast = page.isLast
            async let next: Page? =
                isLast ? nil : fetch(table, filter: filter, after: last, pageSize: nextSize, count: false)
            let (applied, skipped) = try await apply(items, to: table, cursor: last, queryID: queryID)
            summary.appliedCount += applied
            summary.skippedCount += skipped
            received += items.count
            progress?(PullProgress(appliedCount: received, totalCount: total))
            cursor = last
            guard let following = try await next else { break }
            summary.requestCount += 1
            page = following
        }
        log.debug(
            "Pull finished",
            metadata: [SyncLogKey.rows: "\(summary.appliedCount)", SyncLogKey.pages: "\(summary.requestCount)"])
    }

    /// The setting that holds when a table's last pull finished.
    static func lastPullKey(_ table: TableName) -> String { "lastPull.\(table.canonical)" }

    /// The setting that remembers a server's smaller page size for a table.
    static func pageSizeKey(_ table: TableName) -> String { "pageSize.\(table.canonical)" }

    /// What a pull reads from each row; the rest is stored as the text that arrived.
    static let pulledFields: Set<String> = ["id", "updatedAt", "deleted", "version"]

    static func cursor(of item: JSONValue) throws -> PullCursor {
        guard let id = item.itemID else { throw PullError.invalidRow("a row has no valid id") }
        guard let updatedAt = item.updatedAt else { throw PullError.invalidRow("row \(id) has no updatedAt") }
        return PullCursor(updatedAt: updatedAt, itemID: id)
    }

    /// Downloads the page after `cursor`. A server that refuses the `$top` (400) is asked again
    /// without one, and the page it then returns with a `Link` tells its page size (PROTOCOL.md §5).
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
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        var (response, parsed) = try await sendPage(endpoint.url(table, query: query.queryString), features, log)
        var asked: Int? = pageSize
        if response.status == 400 {
            query.top = nil
            asked = nil
            let retried = try await sendPage(endpoint.url(table, query: query.queryString), features, log)
            if retried.response.status == 200 { (response, parsed) = retried }
        }
        guard response.status == 200, var page = parsed else {
            throw PullError.rejected(status: response.status, message: response.message)
        }
        let hasLink = response.header("Link") != nil
        page.isLast = !hasLink && (asked.map { page.items.count < $0 } ?? true)
        if hasLink, page.items.count < (asked ?? Int.max) {
            page.serverPageSize = max(page.items.count, 1)
        } else if asked == nil {
            page.serverPageSize = min(pageSize, Self.protocolPageSize)
        }
        return page
    }

    /// The protocol's default page size, remembered when a server refused `$top` and its page size
    /// could not be seen.
    static let protocolPageSize = 50

    /// Sends a page request until a reply that is not transient (a 200 whose body is not a page is),
    /// and returns it with its page, parsed once.
    private func sendPage(_ url: URL, _ features: [String], _ logger: Logger) async throws
        -> (response: HTTPResponseData, page: Page?)
    {
        var page: Page?
        let response = try await sendRetrying(logger: logger) {
            try await endpoint.send("GET", url, features: features)
        } isTransient: { response in
            page = response.status == 200 ? Self.page(of: response) : nil
            return isTransientStatus(response.status) || (response.status == 200 && page == nil)
        }
        return (response, page)
    }

    /// The rows of a page body: a JSON array, or `{"results": […], "count": N}`; nil when unreadable.
    static func page(of response: HTTPResponseData) -> Page? {
        if let elements = try? JSONValue.parseArrayElements(response.body, keeping: Self.pulledFields) {
            return Page(items: elements, isLast: false)
        }
        if let body = response.json, let results = body["results"]?.arrayValue {  // with $inlinecount
            return Page(
                items: results.map { ($0, $0.serialized()) }, isLast: false,
                totalCount: body["count"]?.intValue.map(Int.init))
        }
        return nil
    }

    /// Applies one page and its cursor in one transaction; rows with pending operations are skipped,
    /// and rows the store already has in that version are left alone.
    ///
    /// - Returns: The rows that changed the store, and those skipped.
    func apply(_ items: [(value: JSONValue, text: String)], to table: TableName, cursor: PullCursor, queryID: QueryID?)
        async throws
        -> (applied: Int, skipped: Int)
    {
        try await store.write { writer in
            let pending = try writer.itemIDsWithOperations(in: table)
            var (applied, skipped) = (0, 0)
            for (item, text) in items {
                guard let id = item.itemID else { continue }
                if pending.contains(id) {  // by bytes: another normalization of the id is another row
                    skipped += 1
                    continue
                }
                if item.isDeleted {
                    guard try writer.containsItem(id, in: table) else { continue }
                    try writer.deleteItem(id, in: table)
                } else {
                    if let version = item["version"]?.stringValue, try writer.itemVersion(id, in: table) == version {
                        continue
                    }
                    try writer.upsert(item, text: text, in: table)
                }
                applied += 1
            }
            if let queryID { try writer.setCursor(cursor, for: table, queryID: queryID) }
            return (applied, skipped)
        }
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
    }
}
