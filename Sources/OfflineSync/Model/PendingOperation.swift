public import SyncCore

/// The kind of a local change waiting to be pushed.
public enum OperationKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// A new item: pushed as `POST /tables/T`.
    case insert
    /// A changed item: pushed as `PATCH /tables/T/{id}` with `If-Match`.
    case update
    /// A removed item: pushed as `DELETE /tables/T/{id}` with `If-Match`.
    case delete
}

/// A local change waiting in the operation queue.
public struct PendingOperation: Sendable, Hashable, Identifiable {
    /// What the first attempt to push an operation sent. Once an operation has been sent, its outcome
    /// is unknown until a reply is read: it is *frozen* (PROTOCOL.md §7), never collapsed with a later
    /// local write, and every retry sends exactly this again — even after a crash.
    struct Attempt: Sendable, Hashable {
        /// The body sent (the row without server-managed fields), for an insert or update.
        var item: JSONValue?
        /// The precondition sent as `If-Match`, if any.
        var version: Version?
        /// For an insert, a server stamp of its table no later than its first send: sent again after a lost reply,
        /// the insert carries it (`X-Sync-Resend-Floor`). A server that has no trace of the item, but remembers
        /// removing its tombstone or forgot removals stamped after the floor, refuses the insert — the first send may
        /// have landed and the item been deleted since — rather than bring a deleted item back (docs/retention.md).
        var floor: WireDate?

        /// Creates an attempt.
        ///
        /// - Parameters:
        ///   - item: The body sent.
        ///   - version: The precondition sent.
        ///   - floor: For an insert, a server stamp of its table no later than its first send.
        init(item: JSONValue?, version: Version?, floor: WireDate? = nil) {
            self.item = item
            self.version = version
            self.floor = floor
        }
    }

    /// The operation's place in the queue: operations are pushed in increasing order, across tables.
    public internal(set) var id: Int64
    /// The table.
    public internal(set) var table: TableName
    /// The item.
    public internal(set) var itemID: ItemID
    /// What to push.
    public internal(set) var kind: OperationKind
    /// For a delete, the item as it was when deleted (its `version` is the precondition); nil otherwise,
    /// since inserts and updates send the local row as it is at push time.
    public internal(set) var item: JSONValue?
    /// What was sent, once the operation has been sent and no reply was read yet; nil before.
    var attempt: Attempt?
    /// Whether pushing the operation re-creates an item the server deleted (set when the user keeps
    /// their version of an item deleted elsewhere): the push undeletes the item, or inserts it when the
    /// server has no trace of it, before sending the change.
    public internal(set) var recreatesItem: Bool
    /// For an update, the row as the server last gave it before the local changes the operation carries (the
    /// *base* of a three-way merge): what the app changed is the difference between the local row and it. Nil
    /// for inserts and deletes, and for an update whose base is not known (one imported from the Azure SDK's
    /// store): such an update sends the whole row and meets a conflict as a whole.
    var base: JSONValue?
    /// The change set the operation belongs to (``SyncClient/changeSet(_:)``), or nil: the operations of one set are
    /// applied on the server together or not at all, and never collapse with an operation outside the set.
    public internal(set) var changeSet: Int64?

    /// Whether the operation was sent and its outcome is unknown: it is *frozen* (PROTOCOL.md §7) — never collapsed
    /// with a later local write, and every retry sends exactly what the first attempt sent, even after a crash.
    public var isAttempted: Bool { attempt != nil }

    /// Creates an operation.
    ///
    /// - Parameters:
    ///   - id: The queue position (assigned by the store for new operations).
    ///   - table: The table.
    ///   - itemID: The item.
    ///   - kind: What to push.
    ///   - item: For a delete, the deleted item.
    ///   - attempt: What the first attempt sent, if it was sent.
    ///   - recreatesItem: Whether the push re-creates an item the server deleted.
    ///   - base: For an update, the row as the server last gave it.
    ///   - changeSet: The change set it belongs to, if any.
    init(
        id: Int64, table: TableName, itemID: ItemID, kind: OperationKind, item: JSONValue? = nil,
        attempt: Attempt? = nil, recreatesItem: Bool = false, base: JSONValue? = nil, changeSet: Int64? = nil
    ) {
        self.id = id
        self.table = table
        self.itemID = itemID
        self.kind = kind
        self.item = item
        self.attempt = attempt
        self.recreatesItem = recreatesItem
        self.base = base
        self.changeSet = changeSet
    }
}
