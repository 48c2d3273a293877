import Foundation
import Logging
import SyncCore

extension SyncContext {
    /// Applies a resolution to a parked operation (PROTOCOL.md §7). Taking the server's item and
    /// discarding drop the operation, store the server's copy from the error, and mark the item to be
    /// fetched again, since the server may have changed it since (and a pull skipped its rows while
    /// the operation waited); keeping mine and changing the kind queue the change again, re-creating
    /// the item when the server deleted it.
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
                let serverIsLive = server.map { !$0.isDeleted } ?? false
                // Mine over a live item the server already has: an insert becomes an update.
                if current.kind == .insert, error.status == 409, serverIsLive { current.kind = .update }
                let local = current.kind == .delete ? current.item : try writer.item(operation.itemID, in: table)
                var mine = item ?? local ?? error.sentItem ?? .object(["id": .string(operation.itemID.rawValue)])
                if item == nil, let serverVersion = server?["version"] { mine["version"] = serverVersion }
                mine["id"] = .string(operation.itemID.rawValue)
                if current.kind == .delete {
                    current.item = mine
                    try writer.deleteItem(operation.itemID, in: table)
                } else {
                    current.item = nil
                    try writer.upsert(mine.removing([.deleted]), in: table)
                }
                current.attempt = nil
                current.recreatesItem = error.isConflict && current.kind != .delete && !serverIsLive
                try writer.updateOperation(current)
                try writer.removeError(operationID: current.id)
                return false
            }
        }
    }

    /// Fetches the items of `table` marked to be fetched again and stores the server's current rows
    /// (PROTOCOL.md §5). An item with a pending operation keeps its local row (its push brings the
    /// server's), and a row the store already has in a newer version is kept.
    ///
    /// - Throws: ``SyncStop`` when the server cannot be reached; the marks stay for the next sync.
    func refetchMarked(in table: TableName) async throws {
        try await refetch(try await store.read { try $0.itemsToRefetch(in: table) }, in: table)
    }

    /// Fetches the items `ids` of `table`, marked to be fetched again, as ``refetchMarked(in:)`` does.
    func refetch(_ ids: [ItemID], in table: TableName) async throws {
        guard !ids.isEmpty else { return }
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        for id in ids {
            let server = try await fetchServerRow(table, id, logger: log)
            try await store.write { [account] writer in
                try account.confirm(in: writer)
                try writer.removeRefetch(id, in: table)
                guard try writer.lastOperation(for: id, in: table) == nil else { return }
                guard case .row(let row) = server, !row.isDeleted else {
                    try writer.deleteItem(id, in: table)
                    return
                }
                if let local = try writer.item(id, in: table)?.updatedAt, let fetched = row.updatedAt,
                    local > fetched
                {
                    return
                }
                try writer.upsert(row, in: table)
            }
        }
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
