import Logging
import SyncCore

/// A user's scope on a shared table (issue 32): the server answers each page of a table shared through groups or
/// scoped by a claim with a token of the caller's scope (the `X-Sync-Scope` header: a digest of their groups, or of
/// the claim), taken before the page. The device keeps the token it last reconciled with; when a page brings another,
/// the user joined or left a group (or the claim changed) since — perhaps while the device was offline — and rows
/// the device holds may be out of scope without any change to them that a cursor would see, while rows of a group
/// just joined sit behind every cursor. So the pull lists the ids in scope, removes the other rows (not those with
/// pending operations: the push before the pull has reported their refusals, and the app decides), and starts every
/// query of the table over. docs/sharing.md tells the whole story.
extension SyncContext {
    /// The response header that carries the caller's scope token.
    static let scopeHeader = "X-Sync-Scope"

    /// The setting that holds the scope token a table's rows were last reconciled with.
    static func scopeKey(_ table: TableName) -> String { "scope.\(table.canonical)" }

    /// Whether a page's scope token says the table's rows must be reconciled: the server sent one and it is not the
    /// one the store holds — unless the store holds none and nothing to check (a first pull into an empty table,
    /// which then keeps the token).
    func scopeChanged(_ table: TableName, token: String?, pulledBefore: Bool) async throws -> Bool {
        guard let token else { return false }
        let key = Self.scopeKey(table)
        let (stored, count) = try await store.read { (try $0.setting(key), try $0.count(in: table, matching: nil)) }
        if stored == token { return false }
        if stored == nil, !pulledBefore, count == 0 {
            try await store.write { try $0.setSetting(token, for: key) }
            return false
        }
        return true
    }

    /// Lists the ids in the caller's scope and removes the table's other rows but those with pending operations,
    /// forgets every cursor of the table, and keeps the listing's scope token — when every page of the listing had
    /// the same (else, after three listings, none: the next pull checks again, and the rows the scope lost meanwhile
    /// go then).
    ///
    /// - Returns: How many rows were removed, and the requests it took.
    func reconcileScope(_ table: TableName, pageSize: Int, _ log: Logger) async throws -> (removed: Int, requests: Int)
    {
        var (attempt, requests) = (0, 0)
        while true {
            attempt += 1
            let (ids, token, consistent, pages) = try await scopeIDs(table, pageSize: pageSize)
            requests += pages
            if !consistent, attempt < 3 { continue }
            let removed = try await store.write { [endpoint] writer in
                try endpoint.account.confirm(in: writer)
                let pending = try writer.itemIDsWithOperations(in: table)
                let removed = try writer.removeItems(in: table, notIn: ids, sparing: pending)
                try writer.removeCursors(in: table)
                try writer.setSetting(consistent ? token : nil, for: Self.scopeKey(table))
                return removed
            }
            log.info(
                "Pull found the user's scope changed: rows out of it removed, queries start over",
                metadata: [SyncLogKey.rows: "\(removed)", SyncLogKey.pages: "\(requests)"])
            return (removed, requests)
        }
    }

    /// The ids of every row in the caller's scope (tombstones too: the pull that follows applies them), in keyset
    /// pages of `id` and `updatedAt` only; the first page's scope token; whether every page had it; the pages.
    private func scopeIDs(_ table: TableName, pageSize: Int) async throws -> (Set<ItemID>, String?, Bool, Int) {
        var ids: Set<ItemID> = []
        var token: String?
        var consistent = true
        var cursor: PullCursor?
        var first = true
        var pages = 0
        while true {
            pages += 1
            let page = try await fetch(
                table, filter: nil, after: cursor, pageSize: pageSize, count: false, select: ["id", "updatedAt"])
            if first {
                token = page.scopeToken
                first = false
            } else if page.scopeToken != token {
                consistent = false
            }
            ids.formUnion(page.items.compactMap { $0.value.itemID })
            guard !page.isLast, let last = page.items.last else { break }
            cursor = try Self.cursor(of: last.value)
        }
        return (ids, token, consistent, pages)
    }
}
