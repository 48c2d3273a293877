import Foundation
import SyncCore

extension SyncContext {
    /// Applies a resolution to a refused operation (PROTOCOL.md §7).
    func resolve(_ error: OperationError, with resolution: ConflictResolution) async throws {
        let operation = error.operation
        try await store.write { writer in
            guard var current = try writer.operation(operation.id) else {
                throw ResolutionError.operationGone(operation)
            }
            let table = operation.table
            switch resolution {
            case .leave:
                return
            case .takeServerItem:
                try writer.removeOperation(current.id)
                if let server = error.serverItem, !server.isDeleted {
                    try writer.upsert(server, in: table)
                } else {
                    try writer.deleteItem(operation.itemID, in: table)
                }
            case .discard:
                try writer.removeOperation(current.id)
                try writer.deleteItem(operation.itemID, in: table)
            case .keepMine(let item), .changeKind(_, let item):
                if case .changeKind(let kind, _) = resolution { current.kind = kind }
                let local = current.kind == .delete ? current.item : try writer.item(operation.itemID, in: table)
                var mine = item ?? local ?? error.sentItem ?? .object(["id": .string(operation.itemID.rawValue)])
                if item == nil, let serverVersion = error.serverItem?["version"] { mine["version"] = serverVersion }
                mine["id"] = .string(operation.itemID.rawValue)
                if current.kind == .delete {
                    current.item = mine
                    try writer.deleteItem(operation.itemID, in: table)
                } else {
                    current.item = nil
                    try writer.upsert(mine, in: table)
                }
                try writer.updateOperation(current)
                try writer.removeError(operationID: current.id)
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
