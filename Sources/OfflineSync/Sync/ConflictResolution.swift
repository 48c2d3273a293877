public import SyncCore

/// What to do with an operation the server refused (PROTOCOL.md §7).
public enum ConflictResolution: Sendable, Hashable {
    /// Drop the operation and store the server's item locally (server wins).
    case takeServerItem
    /// Drop the operation and the local row.
    case discard
    /// Keep the operation and push it again with `item`, which carries the server's `version` so that the next
    /// attempt passes the precondition (client wins). Nil: the local row — for an update whose base is known
    /// (<doc:HandlingConflicts>), the server's row with every field changed locally since the base set to the local
    /// value, so that the fields only another device changed keep that device's values.
    case keepMine(JSONValue?)
    /// Change the operation's kind (for example a 409 insert becomes an update) and push it again,
    /// with `item` as for ``keepMine(_:)``.
    case changeKind(OperationKind, JSONValue?)
    /// Leave it: the error stays until resolved later.
    case leave
}

/// Decides conflicts during a push, one at a time.
///
/// For example:
/// ```swift
/// var configuration = SyncClient.Configuration()
/// configuration.conflictHandler = .merge { local, server in
///     var merged = server
///     merged["text"] = local["text"]    // keep my text, take everything else
///     return merged
/// }
/// ```
public struct ConflictHandler: Sendable {
    /// Returns the resolution of one conflict.
    public var resolve: @Sendable (OperationError) async throws -> ConflictResolution

    /// A handler that decides with `resolve`.
    ///
    /// - Parameter resolve: Returns the resolution of one conflict.
    public init(_ resolve: @escaping @Sendable (OperationError) async throws -> ConflictResolution) {
        self.resolve = resolve
    }

    /// The server's copy always wins.
    public static let serverWins = ConflictHandler { _ in .takeServerItem }

    /// The local change always wins: it is pushed again over the server's version.
    public static let clientWins = ConflictHandler { error in
        error.operation.kind == .insert && error.status == 409 ? .changeKind(.update, nil) : .keepMine(nil)
    }

    /// A custom merge: `merge(local, server)` returns the item to push over the server's version.
    ///
    /// - Parameter merge: Combines the local item (what was sent) and the server's item.
    /// - Returns: A handler that pushes the merged item.
    public static func merge(_ merge: @escaping @Sendable (_ local: JSONValue, _ server: JSONValue) -> JSONValue)
        -> ConflictHandler
    {
        ConflictHandler { error in
            guard let server = error.serverItem, let local = error.sentItem else { return .leave }
            var merged = merge(local, server)
            merged["version"] = server["version"]
            return error.operation.kind == .insert ? .changeKind(.update, merged) : .keepMine(merged)
        }
    }
}
