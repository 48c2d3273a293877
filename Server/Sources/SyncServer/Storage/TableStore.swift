public import Foundation
public import SyncCore
public import SyncOData

/// The storage role of the server: tables of items with system properties, queried with OData and
/// written under optimistic concurrency (PROTOCOL.md §3–§5).
///
/// Implementations must keep the cursor guarantee of §5: within a table, every write that commits
/// after a query returned rows up to `(updatedAt, id) = (T, I)` gets a greater cursor.
/// `SQLiteTableStore` is the embedded one.
///
/// Every call takes a ``RowScope``: the rows the caller may see and write. A row outside it is as missing — an
/// insert of its id fails with ``TableStoreError/idTaken`` — and its hidden columns never leave the store. Stores
/// check the scope in the statement or transaction that writes, so a concurrent write cannot move a row into or
/// out of scope between the check and the write. Rows of a per-user table (``TableConfiguration/perUser``)
/// belong to an owner, kept in its ``TableConfiguration/ownerColumn``: a scope with an owner sees and writes that
/// owner's rows only; one without reads every owner's rows and cannot write. For each scope, the cursor
/// guarantee holds (a scope narrows which rows a reader sees, never their cursors).
public protocol TableStore: Sendable {
    /// Creates the configured tables that do not exist yet, and adds declared columns they lack.
    ///
    /// - Parameter tables: Every table the server serves.
    /// - Throws: A storage error when the database cannot be prepared.
    func prepare(_ tables: [TableConfiguration]) async throws

    /// The table's current schema, or nil for a table that is not configured.
    ///
    /// - Parameter table: The table's name (any case).
    /// - Returns: Its schema.
    func schema(of table: TableName) async throws -> TableSchema?

    /// The rows matching `query`, in its order with `id` as the final key, at most `limit` of them.
    ///
    /// - Parameters:
    ///   - table: The table.
    ///   - query: The filter, order, skip and selection (its `top` is ignored: use `limit`); a hidden column is as
    ///     unknown to it.
    ///   - scope: The rows the caller may see.
    ///   - limit: The most rows to return.
    ///   - maxBytes: The most bytes of JSON for the rows: the page ends after the row that passes it (so
    ///     one row always fits), and says more match.
    ///   - shape: The system properties each row carries (user fields follow `query.select`).
    /// - Returns: The rows, whether more match, and the total count when the query asks for it.
    /// - Throws: ``TableStoreError``.
    func query(
        _ table: TableName, _ query: ODataQuery, scope: RowScope, limit: Int, maxBytes: Int, shape: RowShape
    ) async throws -> QueryPage

    /// One item by id; nil when missing, or soft-deleted and `includeDeleted` is false.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - table: The table.
    ///   - scope: The rows the caller may see.
    ///   - includeDeleted: Whether a tombstone counts.
    /// - Returns: The item, or nil.
    /// - Throws: ``TableStoreError``.
    func item(_ id: ItemID, in table: TableName, scope: RowScope, includeDeleted: Bool) async throws -> JSONValue?

    /// Inserts an item, stamping its system properties.
    ///
    /// - Parameters:
    ///   - fields: The item's fields (system properties other than `id` are ignored).
    ///   - id: The id to store it under.
    ///   - table: The table.
    ///   - scope: The rows the caller may write; its owner owns the new row of a per-user table (required there).
    /// - Returns: The stored item.
    /// - Throws: ``TableStoreError/alreadyExists(_:)`` with the stored item (even a tombstone),
    ///   ``TableStoreError/idTaken`` when a row outside the scope holds the id, or ``TableStoreError/invalidItem(_:)``.
    func insert(_ fields: [String: JSONValue], id: ItemID, into table: TableName, scope: RowScope) async throws
        -> JSONValue

    /// Changes the given fields of an item; absent fields stay as they are. A `deleted` flag among them is
    /// stored in a soft-delete table (a v3 replace); other system properties are ignored.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - fields: The fields to change.
    ///   - table: The table.
    ///   - scope: The rows the caller may write (with the owner, in a per-user table).
    ///   - precondition: The version the stored item must have, if any.
    ///   - includeDeleted: Whether a tombstone may be updated.
    /// - Returns: The stored item.
    /// - Throws: ``TableStoreError/notFound``, ``TableStoreError/preconditionFailed(_:)`` with the
    ///   stored item, or ``TableStoreError/invalidItem(_:)``.
    func update(
        _ id: ItemID, with fields: [String: JSONValue], in table: TableName, scope: RowScope,
        precondition: Precondition?, includeDeleted: Bool
    ) async throws -> JSONValue

    /// Deletes an item: a tombstone in a soft-delete table, gone otherwise.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - table: The table.
    ///   - scope: The rows the caller may write (with the owner, in a per-user table).
    ///   - precondition: The version the stored item must have, if any.
    /// - Returns: The item as deleted (a tombstone, or the last stored copy).
    /// - Throws: ``TableStoreError/notFound`` (also for an item already deleted) or
    ///   ``TableStoreError/preconditionFailed(_:)``.
    func delete(_ id: ItemID, from table: TableName, scope: RowScope, precondition: Precondition?) async throws
        -> JSONValue

    /// Brings a soft-deleted item back; a live item is returned unchanged.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - table: The table.
    ///   - scope: The rows the caller may write (with the owner, in a per-user table).
    ///   - precondition: The version the stored item must have, if any.
    /// - Returns: The live item.
    /// - Throws: ``TableStoreError/notFound`` or ``TableStoreError/preconditionFailed(_:)``.
    func undelete(_ id: ItemID, in table: TableName, scope: RowScope, precondition: Precondition?) async throws
        -> JSONValue

    /// Whether ``atomically(_:)`` applies sets of writes all or none (default: false).
    var offersAtomicSets: Bool { get }

    /// Runs `body` with the store of a set of writes: the writes `body` makes through that store commit together or
    /// not at all — applied when `body` returns, undone when it throws. Reads through it see the set's writes; other
    /// callers, this store's own included, see none of them before the commit. A call on the set's store joins the
    /// set. Cancelling the caller cancels `body`; its writes are then undone.
    ///
    /// - Parameter body: The work, given the set's store (the transaction is that value, not the task's context).
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (its writes undone), ``TableStoreError/unavailable(_:)`` when the set could not
    ///   begin or commit, or — from a store without sets (``offersAtomicSets`` false, the default) — at once,
    ///   without running `body`.
    func atomically<T: Sendable>(_ body: @escaping @Sendable (any TableStore) async throws -> T) async throws -> T

    /// Up to `limit` writes from the outbox (of the tables with a ``TableHooks/afterCommit`` hook) that no drainer
    /// holds, oldest first, now held by the caller for `lease` — after which, not removed, they are handed out again.
    ///
    /// - Parameters:
    ///   - limit: The most writes to return.
    ///   - lease: How long the caller holds them.
    /// - Returns: The writes.
    /// - Throws: ``TableStoreError/unavailable(_:)``.
    func leaseCommits(limit: Int, for lease: Duration) async throws -> [CommittedWrite]

    /// Removes delivered writes from the outbox.
    ///
    /// - Parameter sequences: Their ``CommittedWrite/sequence``s.
    /// - Throws: ``TableStoreError/unavailable(_:)``.
    func removeCommits(_ sequences: [Int64]) async throws

    /// The live rows of a members table that make `user` a member (of `group` only, when given), in one query: each
    /// with the group, the role, and — with `exitsOf` — the stamp of the latest move of a row of that shared table out
    /// of the group (the write that took it out of its members' scope; nil when none did).
    ///
    /// - Parameters:
    ///   - user: The member.
    ///   - table: The members table (``TableConfiguration/members``).
    ///   - group: The one group to look at, or nil for all.
    ///   - exitsOf: The shared table whose moves to read (with a ``TableConfiguration/groupColumn``), or nil.
    /// - Returns: The memberships, in no order.
    /// - Throws: ``TableStoreError``.
    func memberships(of user: String, in table: TableName, group: String?, exitsOf: TableName?) async throws
        -> [Membership]

    /// The next id of a table with ``TableConfiguration/integerIDs``: greater than every id the store gave the table
    /// before (also of rows deleted since, and of rows given by other instances on the same database) and than every
    /// integer id its rows hold. Taken even when the insert that asked for it fails (a gap, as SQL identities leave).
    ///
    /// - Parameter table: The table.
    /// - Returns: The id, 1 or more.
    /// - Throws: ``TableStoreError``; from a store without integer ids (the default), ``TableStoreError/unavailable(_:)``.
    func nextIntegerID(in table: TableName) async throws -> Int64

    /// Removes up to about `limit` of the table's oldest tombstones older than `age`, in one short transaction that
    /// also moves the table's horizon to the newest `updatedAt` it removed (a page read after it carries that horizon:
    /// ``QueryPage/horizon``). Later writes to the table get greater stamps than the horizon. Age is measured on the
    /// table's stamps: from `now`, or from the table's newest stamp when that is later — stamps run ahead of the clock
    /// while a table takes more than a write a millisecond, and tombstones must not pile up meanwhile (a per-user
    /// table on PostgreSQL, whose owners' stamps run apart, is measured from `now`). On a database several instances
    /// share, one removes at a time: another's call meanwhile removes nothing.
    ///
    /// - Parameters:
    ///   - table: A soft-delete table.
    ///   - age: Tombstones last changed longer ago than this go.
    ///   - now: The clock's time.
    ///   - limit: The most to remove in this call.
    /// - Returns: How many went, and the table's horizon now.
    /// - Throws: ``TableStoreError``; from a store without it (the default), ``TableStoreError/unavailable(_:)``.
    func removeTombstones(of table: TableName, olderThan age: Duration, at now: Date, limit: Int) async throws
        -> TombstoneRemoval

    /// Whether an item the table has no trace of may have been removed as a tombstone: its id is among those of the
    /// tombstones removed lately (kept ``TombstoneRemoval/idMemory(after:)`` after their removal), or ids of tombstones
    /// stamped after `floor` were removed and forgotten since. An insert sent again after a lost reply
    /// (``TableConfiguration/resendFloorHeader``) is refused then: its first send may have landed and been deleted.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - table: The table.
    ///   - floor: A stamp of the table no later than the insert's first send.
    /// - Returns: Whether it may have been removed; false from a store that removes no tombstones (the default).
    /// - Throws: ``TableStoreError``.
    func removedTrace(of id: ItemID, in table: TableName, since floor: WireDate) async throws -> Bool

    /// Whether the store can serve now, for `GET /ready`: the database answers, and its bookkeeping is the version
    /// this server knows (not older, not newer). Bounded like a request: a database that does not answer is not ready.
    ///
    /// - Throws: ``TableStoreError/unavailable(_:)`` saying why not. Cancellation stops the check with an error.
    func checkReady() async throws
}

extension TableStore {
    public var offersAtomicSets: Bool { false }

    public func nextIntegerID(in table: TableName) async throws -> Int64 {
        throw TableStoreError.unavailable("this store cannot give integer ids")
    }

    public func removeTombstones(of table: TableName, olderThan age: Duration, at now: Date, limit: Int) async throws
        -> TombstoneRemoval
    {
        throw TableStoreError.unavailable("this store cannot remove tombstones")
    }

    public func removedTrace(of id: ItemID, in table: TableName, since floor: WireDate) async throws -> Bool { false }

    public func atomically<T: Sendable>(_ body: @escaping @Sendable (any TableStore) async throws -> T) async throws
        -> T
    {
        throw TableStoreError.unavailable("this store cannot apply a set of writes atomically")
    }

    /// A query whose rows carry every system property (``RowShape/stored``).
    ///
    /// - Parameters: As for ``query(_:_:scope:limit:maxBytes:shape:)``.
    /// - Returns: The page.
    /// - Throws: ``TableStoreError``.
    public func query(_ table: TableName, _ query: ODataQuery, scope: RowScope, limit: Int, maxBytes: Int)
        async throws -> QueryPage
    {
        try await self.query(table, query, scope: scope, limit: limit, maxBytes: maxBytes, shape: .stored)
    }
}

/// One page of query results, already written as the JSON array the response carries (stores
/// write rows straight to JSON: pages are the server's hottest path).
public struct QueryPage: Sendable {
    /// The rows, in order, as a JSON array (UTF-8), each object's keys sorted.
    public var itemsJSON: [UInt8]
    /// How many rows the array holds.
    public var itemCount: Int
    /// Whether more rows match after these.
    public var hasMore: Bool
    /// The number of rows matching the filter, ignoring skip and limit, when the query asked for it.
    public var totalCount: Int?
    /// The table's horizon (``TombstoneRemoval/horizon``) when the query includes deleted rows and tombstones were
    /// removed: read with or after the rows, so that a tombstone the page lacks went before this horizon.
    public var horizon: WireDate?
    /// On the last page of a query that includes deleted rows, of a table with a ``TableConfiguration/tombstoneRetention``:
    /// a stamp that every write committed after the page was read passes, read before the rows — so a client that
    /// read every page of its pull has every matching row up to it, and may move its cursor there (docs/retention.md:
    /// a device whose query sees no change keeps up with the horizon without listing). Nil when the store cannot say.
    public var watermark: WireDate?

    /// Creates a page.
    ///
    /// - Parameters:
    ///   - itemsJSON: The rows as a JSON array.
    ///   - itemCount: How many rows it holds.
    ///   - hasMore: Whether more rows match.
    ///   - totalCount: The total count, if asked for.
    ///   - horizon: The table's horizon, when the query includes deleted rows.
    public init(itemsJSON: [UInt8], itemCount: Int, hasMore: Bool, totalCount: Int?, horizon: WireDate? = nil) {
        self.itemsJSON = itemsJSON
        self.itemCount = itemCount
        self.hasMore = hasMore
        self.totalCount = totalCount
        self.horizon = horizon
    }
}

/// Why a request whose database work ran past the query timeout is answered 503, on either store.
let queryTimeoutMessage = "the request's database work took longer than the query timeout"

/// How long one atomic set may run on either store (its transaction, or its hold of SQLite's writer): 30 s, or the
/// store's query timeout when that is longer. A set runs several statements and waits for the sets before it to commit:
/// `AtomicBatchTests`' four sets at once took more than a fixed 30 s in a whole-suite run on two cores, on a store whose
/// queries may take 2 minutes.
func atomicSetLimit(queryTimeout: Duration) -> Duration { max(.seconds(30), queryTimeout) }

/// Why a filter the database cannot parse for its nesting is refused (400).
let tooDeepMessage =
    "$filter nests too deeply for the database: use fewer parentheses, not or functions inside one another"

/// Why a store refused an operation. The HTTP layer turns each case into a status and a body.
public enum TableStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The table is not configured.
    case unknownTable(TableName)
    /// No such item (or it is soft-deleted).
    case notFound
    /// An insert's id is taken; the payload is the stored item.
    case alreadyExists(JSONValue)
    /// An insert's id is taken by a row outside the caller's scope (which the caller must not see).
    case idTaken
    /// The stored item's version does not satisfy the precondition; the payload is the stored item.
    case preconditionFailed(JSONValue)
    /// The item does not fit the table; the message names the field.
    case invalidItem(String)
    /// The query does not fit the table; the message names the field or option.
    case invalidQuery(String)
    /// The database is unreachable or failed; the message is safe to show.
    case unavailable(String)
    /// The write would put the row where the caller may not write (a group of a shared table); the message says where.
    case forbidden(String)

    /// One readable line without item contents.
    public var description: String {
        switch self {
        case .unknownTable(let name): "Table '\(name)' does not exist"
        case .notFound: "The item does not exist"
        case .alreadyExists, .idTaken: "An item with this id already exists"
        case .preconditionFailed: "The item has changed: its version does not match"
        case .invalidItem(let message): "Invalid item: \(message)"
        case .invalidQuery(let message): "Invalid query: \(message)"
        case .unavailable(let message): "The database is unavailable: \(message)"
        case .forbidden(let message): message
        }
    }
}
