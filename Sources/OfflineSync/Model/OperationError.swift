/// A pending operation that the server refused — a conflict or a definitive refusal — kept with the
/// operation until it is resolved (PROTOCOL.md §7). Transient failures never make one.
public struct OperationError: Sendable, Hashable, Identifiable {
    /// The operation's queue position; one error per operation.
    public var id: Int64 { operation.id }
    /// The refused operation, as it was sent.
    public var operation: PendingOperation
    /// The HTTP status the server answered.
    public var status: Int
    /// The server's message (the `error` of its body), if any.
    public var message: String?
    /// The item that was sent (nil for a delete).
    public var sentItem: JSONValue?
    /// The server's current copy of the item for a conflict (a tombstone when it was deleted there),
    /// nil when the server has no trace of it or for a refusal.
    public var serverItem: JSONValue?

    /// Creates an operation error.
    ///
    /// - Parameters:
    ///   - operation: The refused operation.
    ///   - status: The HTTP status.
    ///   - message: The server's message.
    ///   - sentItem: The item sent.
    ///   - serverItem: The server's copy.
    public init(
        operation: PendingOperation, status: Int, message: String?, sentItem: JSONValue?, serverItem: JSONValue?
    ) {
        self.operation = operation
        self.status = status
        self.message = message
        self.sentItem = sentItem
        self.serverItem = serverItem
    }

    /// For a conflicting update, the row as the server last gave it before the local change (the base of the
    /// three-way merge); nil when not known (an insert, a delete, an update imported from the Azure SDK's store).
    public var baseItem: JSONValue? { operation.base }

    /// The user fields changed both locally and on the server since ``baseItem``, to different values, in name
    /// order: what the conflict is about (empty when the base is not known, or for a delete on either side).
    public var conflictingFields: [String] {
        guard let base = operation.base, let mine = sentItem, let theirs = serverItem, !theirs.isDeleted else {
            return []
        }
        return FieldMerge.merge(base: base, mine: mine, theirs: theirs).conflicts
    }

    /// Whether this is a conflict — 409 or 412, 404 on an update (the item was deleted on the server; a v3 server
    /// answers 410), or 410 on an insert sent again after a lost reply (the item may have been deleted after it
    /// landed, and the server no longer keeps the tombstone: docs/retention.md) — rather than a refusal of the change
    /// itself. Both stay parked until resolved.
    public var isConflict: Bool {
        switch (status, operation.kind) {
        case (409, _), (412, _), (404, .update), (410, .update), (410, .insert): true
        default: false
        }
    }
}

extension OperationError: CustomStringConvertible {
    /// One line without item contents, such as `Conflict (412) on update of TodoItem/a1`.
    public var description: String {
        let target = "\(operation.kind.rawValue) of \(operation.table)/\(operation.itemID)"
        return isConflict ? "Conflict (\(status)) on \(target)" : "Server refused \(target) (\(status))"
    }
}
