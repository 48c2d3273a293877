import Logging
public import SyncCore

/// Code a table runs before each write, in the request's task, in both dialects and in batches: it may check the
/// write, change the fields written (set server-owned fields, normalize), or refuse it by throwing
/// ``RequestRefusal`` — the client sees a refused change with the hook's status and message, not a conflict. What
/// the Azure Mobile Apps Node.js server's `table.insert(…)`, `table.update(…)` and `table.delete(…)` scripts did.
///
/// For example, a table whose items need a title and carry who last changed them:
/// ```swift
/// configuration.hooks["TodoItem"] = TableHooks(
///     beforeInsert: { write in
///         guard write.fields["text"]?.stringValue?.isEmpty == false else {
///             throw RequestRefusal(.badRequest, "A to-do needs a text")
///         }
///         write.fields["changedBy"] = write.caller.map { .string($0.subject) } ?? .null
///     })
/// ```
/// A ``read`` hook narrows what each caller may see *and change* of the table: the rows its ``TableView/filter``
/// passes, without its ``TableView/hiddenColumns`` — in pages, counts, items, write answers, conflicts, `/batch` and
/// the console, in both dialects. For example, rows of the caller's team, and a column callers never see:
/// ```swift
/// configuration.hooks["Task"] = TableHooks(read: { read in
///     guard let team = read.caller?.claims["team"]?.stringValue else { throw RequestRefusal(.forbidden, "No team") }
///     return TableView(filter: .binary(.eq, .member("team"), .literal(.string(team))), hiddenColumns: ["cost"])
/// })
/// ```
/// A row outside the view is as missing: reading, changing or deleting it is a 404, inserting its id a 409 that
/// shows nothing of it. The store checks the filter in the statement or transaction that writes, so a concurrent
/// write cannot slip a row out of the view between a check and a write. Values a client sends for hidden columns
/// are dropped before the write hooks run, so those may set them (a server-owned field).
///
/// An ``afterCommit`` hook runs for every committed write, at least once, even across a crash: the write is recorded in
/// an outbox in the same database transaction, and removed once the hook returned (``CommittedWrite``) — for audit
/// logs, webhooks and emails. It runs apart from requests, in a delivery task the server starts.
///
/// A write hook runs before the write's preconditions are checked, so a write it lets through may still be a conflict.
/// It may not change system properties (`version`, `updatedAt`, …): that is answered 500. Any error other than
/// ``RequestRefusal`` is a 500 whose details go to the log only.
public struct TableHooks: Sendable {
    /// A hook: it receives the write and may change its ``TableWrite/fields`` or throw.
    public typealias Hook = @Sendable (inout TableWrite) async throws -> Void
    /// A read hook: it receives who asks and returns what they see, or throws ``RequestRefusal``.
    public typealias ReadHook = @Sendable (TableRead) async throws -> TableView

    /// An after-commit hook: it receives a committed write; when it throws, the write is delivered again later.
    public typealias AfterCommit = @Sendable (CommittedWrite) async throws -> Void

    /// Before every request to the table — reads and writes, `/changes` too: what the caller may see and change.
    public var read: ReadHook?
    /// After each write committed, at least once (``SyncServerConfiguration/afterCommitLease`` after a failure).
    public var afterCommit: AfterCommit?
    /// Before an insert (`POST /tables/T`); the fields are the item's, without `id`.
    public var beforeInsert: Hook?
    /// Before an update: v2's `PATCH` (the fields sent) and v3's `PUT` (the whole item, `deleted` included).
    public var beforeUpdate: Hook?
    /// Before a delete (`DELETE /tables/T/{id}`); there are no fields.
    public var beforeDelete: Hook?
    /// Before v2's undelete (`POST /tables/T/{id}`); there are no fields.
    public var beforeUndelete: Hook?

    /// Creates hooks; those left nil do nothing.
    ///
    /// - Parameters:
    ///   - read: What each caller sees of the table.
    ///   - beforeInsert: Before an insert.
    ///   - beforeUpdate: Before an update.
    ///   - beforeDelete: Before a delete.
    ///   - beforeUndelete: Before an undelete.
    ///   - afterCommit: After each committed write.
    public init(
        read: ReadHook? = nil, beforeInsert: Hook? = nil, beforeUpdate: Hook? = nil, beforeDelete: Hook? = nil,
        beforeUndelete: Hook? = nil, afterCommit: AfterCommit? = nil
    ) {
        self.read = read
        self.afterCommit = afterCommit
        self.beforeInsert = beforeInsert
        self.beforeUpdate = beforeUpdate
        self.beforeDelete = beforeDelete
        self.beforeUndelete = beforeUndelete
    }

    func hook(_ kind: TableWrite.Kind) -> Hook? {
        switch kind {
        case .insert: beforeInsert
        case .update: beforeUpdate
        case .delete: beforeDelete
        case .undelete: beforeUndelete
        }
    }
}

/// A request to a table, as a ``TableHooks/read`` hook sees it.
public struct TableRead: Sendable {
    /// The table.
    public let table: TableName
    /// Who asks, when the request carried a valid token.
    public let caller: Caller?
}

/// What a caller sees of a table (``TableHooks/read``): the rows `filter` passes, without `hiddenColumns`.
public struct TableView: Sendable, Hashable {
    /// The condition a row must meet (nil: every row), built from the caller with ``ODataExpression``'s cases or
    /// parsed from constant text (``ODataExpression/init(parsing:dialect:)``) — never from text spliced with a
    /// claim's value. It may name hidden columns.
    public var filter: ODataExpression?
    /// Columns the caller never sees, and cannot query, sort by, select or write.
    public var hiddenColumns: Set<String>

    /// A view.
    ///
    /// - Parameters:
    ///   - filter: The condition a row must meet.
    ///   - hiddenColumns: Columns the caller never sees.
    public init(filter: ODataExpression? = nil, hiddenColumns: Set<String> = []) {
        self.filter = filter
        self.hiddenColumns = hiddenColumns
    }

    /// The whole table.
    public static let everything = TableView()
}

/// One write, as a ``TableHooks`` hook sees it.
public struct TableWrite: Sendable {
    /// What the write does.
    public enum Kind: String, Sendable, Hashable {
        case insert, update, delete, undelete
    }

    /// What the write does.
    public let kind: Kind
    /// The table.
    public let table: TableName
    /// The item's id (in a table of ``TableConfiguration/integerIDs``, its number's digits: `42`).
    public let id: ItemID
    /// Who writes, when the request carried a valid token.
    public let caller: Caller?
    /// The fields written (see each hook); the hook may change them.
    public var fields: [String: JSONValue]
}
