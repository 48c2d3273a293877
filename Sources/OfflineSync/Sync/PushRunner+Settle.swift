import Foundation
import Logging
import SyncCore

/// What a settled operation leaves in the store: a conflict merged field by field, the server's row after a
/// completion, and the newer edits of the item waiting behind it rebased over that row.
extension PushRunner {
    /// Merges a conflicting update with the server's row, field by field over its base (``FieldMerge``): fields
    /// changed on one side only keep that side's value, and fields changed on both sides are decided by the table's
    /// ``FieldConflictPolicy`` — unless it surfaces them. The merged row becomes the local row, with the server's
    /// version, and the operation waits to go again with the server's row as its base, carrying a newer edit of the
    /// item waiting behind it too. Not merged: another kind, an update whose base is not known, a server row deleted
    /// or absent, a newer delete of the item waiting.
    ///
    /// `sent`: the row the operation's attempt sent. A field the server holds as sent, changed from the base, is this
    /// device's own change — the attempt was applied and its reply lost — not the server's: the merge takes it as the
    /// base's value, so a newer local edit of that field wins (else the merge kept the sent value, undoing it).
    ///
    /// - Returns: Whether it merged.
    func merge(_ operation: PendingOperation, with theirs: JSONValue?, status: Int, sent: JSONValue?)
        async throws -> Bool
    {
        guard operation.kind == .update, operation.base != nil, let theirs, !theirs.isDeleted,
            status == 409 || status == 412
        else { return false }
        let policy = fieldConflicts[operation.table.canonical] ?? .surface
        let merged = try await store.write { writer -> Bool in
            guard var current = try writer.operation(operation.id), current.kind == .update,
                let base = current.base.map({ FieldMerge.base($0, sent: sent, theirs: theirs) }),
                let last = try writer.lastOperation(for: operation.itemID, in: operation.table),
                last.id == current.id || (last.kind == .update && last.attempt == nil),
                let mine = try writer.item(operation.itemID, in: operation.table),
                let merged = FieldMerge.merge(base: base, mine: mine, theirs: theirs, policy: policy)
            else { return false }
            // A newer edit waiting behind this one: the local row holds both, so the merge carries both, and this
            // operation, no longer frozen, sends them (as a later edit collapses into an update not yet sent).
            if last.id != current.id { try writer.removeOperation(last.id) }
            try writer.upsert(merged, in: operation.table)
            current.attempt = nil
            current.recreatesItem = false
            current.base = theirs
            try writer.updateOperation(current)
            try writer.removeError(operationID: current.id)
            return true
        }
        if merged {
            logger.debug(
                "A conflict merged by itself",
                metadata: [SyncLogKey.table: "\(operation.table)", "sync.item": "\(operation.itemID)"])
        }
        return merged
    }

    /// Removes a pushed operation and stores the server's item, unless a newer operation for the item
    /// was queued meanwhile: then only the server's version is taken, for the next precondition.
    func complete(_ operation: PendingOperation, serverItem: JSONValue?) async throws {
        try await store.write { writer in try Self.complete(operation, serverItem: serverItem, writer: writer) }
    }

    /// ``complete(_:serverItem:)`` in the caller's transaction.
    static func complete(_ operation: PendingOperation, serverItem: JSONValue?, writer: LocalStoreWriter) throws {
        try writer.removeOperation(operation.id)
        try applyServerRow(serverItem, for: operation, writer: writer)
    }

    /// Stores the server's current row after `operation` left the queue (nil or a tombstone: the local
    /// row goes). When a newer operation for the item waits, the local change wins until it is pushed:
    /// the local row takes the server's version, and the fields the server changed that the newer edit
    /// did not (see ``mergeServerChanges(_:sent:into:)``; after a resolution that sent nothing, the newer update's
    /// changes since its base, ``FieldMerge``).
    static func applyServerRow(_ serverItem: JSONValue?, for operation: PendingOperation, writer: LocalStoreWriter)
        throws
    {
        let table = operation.table
        // Newer edits of the item: one, or several when change sets' boundaries keep them apart.
        let waiting = try writer.operations(for: operation.itemID, in: table)
        if var newer = waiting.last, let next = waiting.first {
            guard let serverItem, let version = serverItem["version"], !serverItem.isDeleted else { return }
            if newer.kind == .delete {
                newer.item?["version"] = version
                try writer.updateOperation(newer)
            } else if var row = try writer.item(operation.itemID, in: table) {
                if operation.attempt == nil, next.kind == .update, next.attempt == nil, let base = next.base {
                    // Nothing the settled operation sent is on the server (a conflict taken or discarded): the newer
                    // edits' own changes, since the first one's base, go over the server's row. When one meets a
                    // change of the server's, the row and the newer operations stay as they are: they meet that
                    // conflict themselves.
                    let outcome = FieldMerge.merge(base: base, mine: row, theirs: serverItem)
                    guard outcome.conflicts.isEmpty else { return }
                    // The user fields merged; the system properties stay the local row's, with the server's version
                    // (below), as after any settled operation with a newer one waiting.
                    let merged = outcome.merged.userFields.objectValue ?? [:]
                    for name in Set(row.userFields.objectValue?.keys ?? [:].keys).union(merged.keys) {
                        row[name] = merged[name]
                    }
                } else if let sent = operation.attempt?.item {
                    guard let merged = mergeServerChanges(serverItem, sent: sent, into: row) else { return }
                    row = merged
                }
                row["version"] = version
                try writer.upsert(row, in: table)
                // The newer updates' changes are now those since the server's row.
                for var update in waiting where update.kind == .update && update.attempt == nil && update.base != nil {
                    update.base = serverItem
                    try writer.updateOperation(update)
                }
            }
        } else if let serverItem, !serverItem.isDeleted {
            try writer.upsert(serverItem, in: table)
        } else {
            try writer.deleteItem(operation.itemID, in: table)
        }
    }

    /// The local row of an item whose newer edit waits, with what the server's row changed since `sent`
    /// (the body of the operation just settled) in the fields the newer edit left as sent. Without them the
    /// newer edit would undo another device's change unseen: the server's row of a retried operation whose
    /// reply was lost may hold another device's later write (converged: it holds every field sent), and a v3
    /// update replaces the whole row. A field both changed that was sent empty (null or absent) — another
    /// device's value against the newer edit's — is a conflict the newer operation must meet: nil, and the
    /// local row keeps its older version for its precondition. (A converged row holds every field sent, so a
    /// sent value the server holds otherwise is its own form of it in a 2xx reply: the newer edit's stands.)
    static func mergeServerChanges(_ server: JSONValue, sent: JSONValue, into row: JSONValue) -> JSONValue? {
        guard let theirs = server.userFields.objectValue else { return row }
        var merged = row
        for (name, value) in theirs {
            let base = sent[name] ?? .null
            guard value != base else { continue }
            let mine = row[name] ?? .null
            if mine == base {
                merged[name] = value
            } else if mine != value, base == .null {
                return nil
            }
        }
        return merged
    }
}

extension ConflictResolution {
    /// Whether the operation is pushed again after this resolution.
    var retries: Bool {
        switch self {
        case .keepMine, .changeKind: true
        default: false
        }
    }
}
