import Logging
import SyncCore
import SyncOData

/// A user's scope on a shared table (issue 32): the server answers each page of a table shared through groups or
/// scoped by a claim with a token of the caller's scope (the `X-Sync-Scope` header: a digest of their groups, or of
/// the claim), taken before the page. The device keeps the token it last reconciled with; when a page brings another,
/// the user joined or left a group (or the claim changed) since — perhaps while the device was offline — and rows
/// the device holds may be out of scope without any change to them that a cursor would see, while rows of a group
/// just joined sit behind every cursor. So the pull lists the ids in scope, removes the other rows (not those with
/// pending operations: the push before the pull has reported their refusals, and the app decides), and starts every
/// query of the table over. docs/sharing.md tells the whole story.
extension PullRunner {
    /// The response header that carries the caller's scope token.
    static let scopeHeader = "X-Sync-Scope"

    /// The setting that holds the scope token a table's rows were last reconciled with.
    static func scopeKey(_ table: TableName) -> String { "scope.\(table.canonical)" }

    /// What a page's scope token says changed since the store's: nothing (the same token; or none sent; or the store
    /// has none and nothing to check — a first pull into an empty table, which keeps the token); only the moves of
    /// rows out of the user's groups (the part after `.`: rows left, none arrived behind the cursors); or the scope.
    enum ScopeChange: Sendable, Equatable {
        case none, exits, scope
    }

    /// `staged` is the listing a pull of several tables together has kept to store (``StagedTable/scope``), if any:
    /// its token is the one to compare with.
    func scopeChange(_ table: TableName, token: String?, pulledBefore: Bool, staged: StagedScope? = nil) async throws
        -> ScopeChange
    {
        guard let token else { return .none }
        let key = Self.scopeKey(table)
        var (stored, count) = try await store.read { (try $0.setting(key), try $0.count(in: table, matching: nil)) }
        if let staged { stored = staged.token }
        if stored == token { return .none }
        guard let stored else {
            if !pulledBefore, count == 0 {
                try await store.write { try $0.setSetting(token, for: key) }
                return .none
            }
            return .scope
        }
        return Self.groups(of: stored) != nil && Self.groups(of: stored) == Self.groups(of: token) ? .exits : .scope
    }

    /// The part of a token before its `.`: the user's groups (nil for a token without one, as a claim's).
    static func groups(of token: String?) -> Substring? {
        token.flatMap { token in token.firstIndex(of: ".").map { token[..<$0] } }
    }

    /// Lists the ids in the caller's scope and removes the table's other rows but those with pending operations,
    /// forgets every cursor of the table when the scope changed (not when rows only moved out of it — unless the
    /// listing found the groups changed meanwhile), and keeps the listing's scope token — when every page of the
    /// listing had the same (else, after three listings, none: the next pull checks again, and the rows the scope lost
    /// meanwhile go then).
    ///
    /// Without `keepsToken` (the scope changed again after each of several listings) no token is kept either, so that
    /// the next pull looks again.
    ///
    /// With `staged` (a pull of several tables together), nothing is written: the listing is kept there, for
    /// ``StagedScope/settle(in:writer:)`` to apply with the pulled rows, and the pull's own cursor starts over.
    ///
    /// - Returns: How many rows were removed, the requests it took, and whether the queries start over.
    func reconcileScope(
        _ table: TableName, _ change: ScopeChange, pageSize: Int, _ log: Logger, staged: inout StagedTable?,
        keepsToken: Bool = true
    ) async throws -> (removed: Int, requests: Int, restarted: Bool) {
        var (attempt, requests) = (0, 0)
        while true {
            attempt += 1
            let (ids, token, consistent, pages) = try await scopeIDs(table, pageSize: pageSize)
            requests += pages
            if !consistent, attempt < 3 { continue }
            // The groups as the listing found them, not as the first page did: a group joined in between has rows
            // behind the cursors too.
            let restarts = { @Sendable (stored: String?) in
                change == .scope || !consistent || Self.groups(of: stored) != Self.groups(of: token)
            }
            if let held = staged {
                let stored: String?
                if let scope = held.scope {
                    stored = scope.token
                } else {
                    stored = try await store.read { try $0.setting(Self.scopeKey(table)) }
                }
                let restarted = restarts(stored)
                staged?.scope = StagedScope(
                    ids: ids, token: consistent && keepsToken ? token : nil,
                    restarted: restarted || held.scope?.restarted == true)
                // Rows an earlier pass kept that the scope has lost since would be stored with its new token, which no
                // later pull would see change: they go now.
                staged?.rows = held.rows.filter { ids.contains($0.key) }
                log.info("Pull of several tables found the user's scope changed: applied with the rows")
                return (0, requests, restarted)
            }
            let (removed, restarted) = try await store.write { [account] writer in
                try account.confirm(in: writer)
                let restarted = restarts(try writer.setting(Self.scopeKey(table)))
                let removed = try StagedScope(
                    ids: ids, token: consistent && keepsToken ? token : nil, restarted: restarted
                )
                .settle(in: table, writer: writer)
                return (removed, restarted)
            }
            log.info(
                restarted
                    ? "Pull found the user's scope changed: rows out of it removed, queries start over"
                    : "Pull found rows moved out of the user's groups: removed",
                metadata: [SyncLogKey.rows: "\(removed)", SyncLogKey.pages: "\(requests)"])
            return (removed, requests, restarted)
        }
    }

    /// The ids of every row in the caller's scope (tombstones too: the pull that follows applies them), in keyset
    /// pages of `id` and `updatedAt` only; the first page's scope token; whether every page had it; the pages.
    private func scopeIDs(_ table: TableName, pageSize: Int) async throws -> (Set<ItemID>, String?, Bool, Int) {
        var token: String?
        var consistent = true
        var first = true
        let (ids, pages) = try await listIDs(table, filter: nil, pageSize: pageSize) { page in
            if first {
                token = page.scopeToken
                first = false
            } else if page.scopeToken != token {
                consistent = false
            }
        }
        return (ids, token, consistent, pages)
    }

    /// The ids of every row matching `filter` in the caller's scope (tombstones too), in keyset pages of `id` and
    /// `updatedAt` only (`fallback`: a size the server took, for a `$top` it refuses); `seen` sees each page.
    ///
    /// - Returns: The ids, and the pages it took.
    func listIDs(
        _ table: TableName, filter: ODataExpression?, pageSize: Int, fallback: Int? = nil,
        _ seen: (Page) -> Void = { _ in }
    ) async throws -> (ids: Set<ItemID>, pages: Int) {
        var ids: Set<ItemID> = []
        var cursor: PullCursor?
        var pages = 0
        while true {
            pages += 1
            let page = try await fetch(
                table, filter: filter, after: cursor, pageSize: pageSize, fallback: fallback, count: false,
                select: ["id", "updatedAt"])
            seen(page)
            ids.formUnion(page.items.compactMap { $0.value.itemID })
            guard !page.isLast, let last = page.items.last else { break }
            cursor = try Self.cursor(of: last.value)
        }
        return (ids, pages)
    }
}
