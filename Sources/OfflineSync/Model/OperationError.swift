/// A pending operation that the server refused, kept with the operation until it is resolved or
/// pushed successfully (PROTOCOL.md §7).
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
    /// The server's copy of the item, when the response carried one (always for 409 and 412).
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

    /// Whether this is a conflict (409 or 412): it stays parked until resolved. Other failures are
    /// tried again by the next push.
    public var isConflict: Bool { status == 409 || status == 412 }
}

extension OperationError: CustomStringConvertible {
    /// One line without item contents, such as `Conflict (412) on update of TodoItem/a1`.
    public var description: String {
        let target = "\(operation.kind.rawValue) of \(operation.table)/\(operation.itemID)"
        return isConflict ? "Conflict (\(status)) on \(target)" : "Server refused \(target) (\(status))"
    }
}
