/// The rules of the operation queue (PROTOCOL.md §6), as pure functions.
enum PendingOperationQueue {
    /// What a new local write does to the queue, given the item's pending operation.
    enum Decision: Sendable, Hashable {
        /// Queue a new operation of this kind at the end.
        case append(OperationKind)
        /// Keep the pending operation as it is (the push sends the latest row).
        case keep
        /// Change the pending operation's kind in place (it keeps its queue position).
        case change(to: OperationKind)
        /// Drop the pending operation; nothing is sent for the item (an insert then a delete).
        case remove
        /// Refuse the write; nothing changes.
        case reject(LocalWriteError.Reason)
    }

    /// Decides how a new write of `kind` combines with the item's pending operation.
    ///
    /// | pending \ new | insert | update | delete |
    /// |---|---|---|---|
    /// | none | append | append | append |
    /// | insert | reject | keep | remove |
    /// | update | reject | keep | change to delete |
    /// | delete | change to update | reject | reject |
    ///
    /// An operation that was sent and whose reply was not read yet (``PendingOperation/isAttempted``)
    /// is frozen: a write that makes sense after it is appended, never collapsed into it, so that a
    /// retry sends exactly what the first attempt sent (PROTOCOL.md §7). So is an operation of another change set
    /// than the write's (or of one when the write is in none, or of none when it is in one): collapsing never moves a
    /// change across a set's boundary, so a set is applied on the server as it was made.
    /// - Parameters:
    ///   - kind: The new write.
    ///   - pending: The item's last pending operation, if any.
    ///   - changeSet: The change set the write is made in, if any.
    /// - Returns: The decision.
    static func decide(_ kind: OperationKind, after pending: PendingOperation?, inSet changeSet: Int64? = nil)
        -> Decision
    {
        guard let pending else { return .append(kind) }
        if pending.isAttempted || pending.changeSet != changeSet { return frozenDecision(kind, after: pending.kind) }
        switch (pending.kind, kind) {
        case (.insert, .insert), (.update, .insert): return .reject(.alreadyExists)
        case (.insert, .update), (.update, .update): return .keep
        case (.insert, .delete): return .remove
        case (.update, .delete): return .change(to: .delete)
        case (.delete, .insert): return .change(to: .update)
        case (.delete, .update): return .reject(.deleted)
        case (.delete, .delete): return .reject(.alreadyDeleted)
        }
    }

    /// After a frozen operation, a write that makes sense after it is appended.
    private static func frozenDecision(_ kind: OperationKind, after pendingKind: OperationKind) -> Decision {
        switch (pendingKind, kind) {
        case (.insert, .insert), (.update, .insert): .reject(.alreadyExists)
        case (.delete, .update): .reject(.deleted)
        case (.delete, .delete): .reject(.alreadyDeleted)
        default: .append(kind)
        }
    }
}

/// Why a local insert, update or delete was refused. Nothing was changed.
public struct LocalWriteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rule the write broke.
    public enum Reason: String, Sendable, Hashable {
        /// An insert of an item that already exists locally or has a pending insert or update.
        case alreadyExists
        /// An update of an item whose delete is pending.
        case deleted
        /// A delete of an item whose delete is pending.
        case alreadyDeleted
        /// An update or delete of an item the local store does not have.
        case notFound
    }

    /// The rule.
    public var reason: Reason
    /// The table.
    public var table: TableName
    /// The item.
    public var itemID: ItemID
    /// The pending operation that made the write impossible, if one did.
    public var pendingOperation: PendingOperation?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - reason: The rule.
    ///   - table: The table.
    ///   - itemID: The item.
    ///   - pendingOperation: The pending operation in the way, if any.
    public init(_ reason: Reason, table: TableName, itemID: ItemID, pendingOperation: PendingOperation? = nil) {
        self.reason = reason
        self.table = table
        self.itemID = itemID
        self.pendingOperation = pendingOperation
    }

    /// One readable line naming the item and the pending operation.
    public var description: String {
        let pending = pendingOperation.map { " (pending \($0.kind.rawValue), queue #\($0.id))" } ?? ""
        switch reason {
        case .alreadyExists: return "\(table)/\(itemID) already exists\(pending)"
        case .deleted: return "\(table)/\(itemID) is deleted\(pending)"
        case .alreadyDeleted: return "\(table)/\(itemID) is already deleted\(pending)"
        case .notFound: return "\(table)/\(itemID) does not exist locally"
        }
    }
}
