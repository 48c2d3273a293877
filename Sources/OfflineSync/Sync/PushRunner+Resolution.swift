import Foundation
import Logging
import SyncCore

extension PushRunner {
    /// Applies a resolution to a parked operation (PROTOCOL.md §7). Taking the server's item and
    /// discarding drop the operation, store the server's copy from the error, and mark the item to be
    /// fetched again, since the server may have changed it since (and a pull skipped its rows while
    /// the operation waited); keeping mine and changing the kind queue the change again, re-creating
    /// the item when the server deleted it. Keeping mine without an item, for an update whose base is known, keeps
    /// the changes made since the base over the server's row (``FieldMerge`` with the client winning).
    ///
    /// - Returns: Whether the item was marked to be fetched again.
    @discardableResult
    func resolve(_ error: OperationError, with resolution: ConflictResolution) async throws -> Bool {
        let operation = error.operation
        return try await store.write { writer in
            guard var current = try writer.operation(operation.id) else {
                throw ResolutionError.operationGone(operation)
            }
            let table = operation.table
            let server = error.serverItem
            switch resolution {
            case .leave:
                return false
            case .takeServerItem, .discard:
                try writer.removeOperation(current.id)
                try Self.applyServerRow(server, for: current, writer: writer)
                guard try writer.lastOperation(for: operation.itemID, in: table) == nil else { return false }
                try writer.markForRefetch(operation.itemID, in: table)
                return true
            case .keepMine(let item), .changeKind(_, let item):
                if case .changeKind(let kind, _) = resolution { current.kind = kind }
                try Self.queueAgain(&current, mine: item, after: error, writer: writer)
                return false
            }
        }
    }

    /// Keeping mine or changing the kind (``resolve(_:with:)``): the operation goes again, over the server's row —
    /// `mine` when given, else the local row (for an update whose base is known, its changes since the base over the
    /// server's row).
    private static func queueAgain(
        _ current: inout PendingOperation, mine item: JSONValue?, after error: OperationError, writer: LocalStoreWriter
    ) throws {
        let operation = error.operation
        let table = operation.table
        let server = error.serverItem
        let serverIsLive = server.map { !$0.isDeleted } ?? false
        // Mine over a live item the server already has: an insert becomes an update.
        if current.kind == .insert, error.status == 409, serverIsLive { current.kind = .update }
        let local = current.kind == .delete ? current.item : try writer.item(operation.itemID, in: table)
        var mine = item ?? local ?? error.sentItem ?? .object(["id": .string(operation.itemID.rawValue)])
        if item == nil, current.kind == .update, let base = current.base, let local, let server, serverIsLive {
            // My changes since the base win; the fields only the server changed keep its values (a whole local row
            // would send my stale copies of them back). A field the server holds as this device sent it is mine, not
            // the server's (``FieldMerge/base(_:sent:theirs:)``).
            let rebased = FieldMerge.base(base, sent: error.sentItem, theirs: server)
            mine = FieldMerge.merge(base: rebased, mine: local, theirs: server, policy: .clientWins) ?? local
        }
        if item == nil, let serverVersion = server?["version"] { mine["version"] = serverVersion }
        mine["id"] = .string(operation.itemID.rawValue)
        let newer = try writer.lastOperation(for: operation.itemID, in: table).flatMap {
            $0.id == current.id ? nil : $0
        }
        if current.kind == .delete {
            current.item = mine
            try writer.deleteItem(operation.itemID, in: table)
        } else if local == nil, var delete = newer, delete.kind == .delete {
            // Deleted on this device after this change: the item stays deleted (the change, with no row to send,
            // goes), and the delete goes over the server's row, which the person has now seen.
            current.item = nil
            if serverIsLive, let serverVersion = server?["version"] {
                delete.item?["version"] = serverVersion
                try writer.updateOperation(delete)
            }
        } else {
            current.item = nil
            try writer.upsert(mine.removing([.deleted]), in: table)
        }
        current.attempt = nil
        current.recreatesItem = error.isConflict && current.kind != .delete && !serverIsLive
        // Mine goes over the server's row: what changed is what differs from it (a delete or an insert again sends
        // the whole row).
        current.base = current.kind == .update && serverIsLive ? server : nil
        try writer.updateOperation(current)
        try writer.removeError(operationID: current.id)
    }
}

/// Why a resolution could not be applied.
public enum ResolutionError: Error, Sendable, CustomStringConvertible {
    /// The operation is no longer queued (pushed, purged or resolved already).
    case operationGone(PendingOperation)

    /// One line.
    public var description: String {
        switch self {
        case .operationGone(let operation):
            "The \(operation.kind.rawValue) of \(operation.table)/\(operation.itemID) is no longer queued"
        }
    }
}
