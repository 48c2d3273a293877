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
    /// The operation's place in the queue: operations are pushed in increasing order, across tables.
    public var id: Int64
    /// The table.
    public var table: TableName
    /// The item.
    public var itemID: ItemID
    /// What to push.
    public var kind: OperationKind
    /// For a delete, the item as it was when deleted (its `version` is the precondition); nil otherwise,
    /// since inserts and updates send the local row as it is at push time.
    public var item: JSONValue?
    /// Whether a push is sending it right now (local writes to the item then queue a new operation).
    public var isInFlight: Bool

    /// Creates an operation.
    ///
    /// - Parameters:
    ///   - id: The queue position (assigned by the store for new operations).
    ///   - table: The table.
    ///   - itemID: The item.
    ///   - kind: What to push.
    ///   - item: For a delete, the deleted item.
    ///   - isInFlight: Whether a push is sending it.
    public init(
        id: Int64, table: TableName, itemID: ItemID, kind: OperationKind, item: JSONValue? = nil,
        isInFlight: Bool = false
    ) {
        self.id = id
        self.table = table
        self.itemID = itemID
        self.kind = kind
        self.item = item
        self.isInFlight = isInFlight
    }
}
