/// Names an incremental pull: the client keeps one cursor per (table, query id), so that pulling
/// again with the same id fetches only what changed since.
///
/// For example:
/// ```swift
/// try await todoItems.pull(queryID: "allTodoItems")
/// ```
public struct QueryID: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The id's text: 1–255 characters, without `|`.
    public let rawValue: String

    /// Creates a query id, or nil when it is empty, longer than 255 characters, or contains `|`.
    ///
    /// - Parameter rawValue: The id's text.
    public init?(rawValue: String) {
        guard (1...255).contains(rawValue.count), !rawValue.contains("|") else { return nil }
        self.rawValue = rawValue
    }

    /// Creates a query id from a literal.
    ///
    /// - Precondition: The literal is 1–255 characters without `|` (a literal is the programmer's own text).
    public init(stringLiteral value: String) {
        precondition(QueryID(rawValue: value) != nil, "A query id is 1–255 characters without '|'")
        rawValue = value
    }

    /// The id's text.
    public var description: String { rawValue }
}

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
    /// Counts the local writes collapsed into this operation, so that a push can tell whether the
    /// item changed while it was being sent.
    public var editCount: Int
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
    ///   - editCount: Local writes collapsed into it.
    ///   - isInFlight: Whether a push is sending it.
    public init(
        id: Int64, table: TableName, itemID: ItemID, kind: OperationKind, item: JSONValue? = nil,
        editCount: Int = 0, isInFlight: Bool = false
    ) {
        self.id = id
        self.table = table
        self.itemID = itemID
        self.kind = kind
        self.item = item
        self.editCount = editCount
        self.isInFlight = isInFlight
    }
}

/// Where an incremental pull stands: the greatest `(updatedAt, id)` already applied.
public struct PullCursor: Sendable, Hashable, Codable {
    /// The last applied row's `updatedAt`.
    public var updatedAt: WireDate
    /// The last applied row's id.
    public var itemID: ItemID

    /// Creates a cursor.
    ///
    /// - Parameters:
    ///   - updatedAt: The last applied row's `updatedAt`.
    ///   - itemID: The last applied row's id.
    public init(updatedAt: WireDate, itemID: ItemID) {
        self.updatedAt = updatedAt
        self.itemID = itemID
    }
}
