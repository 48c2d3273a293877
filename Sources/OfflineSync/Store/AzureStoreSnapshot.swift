import Foundation
import GRDB
import SyncCore

/// What an old store holds, read whole before anything is written.
struct AzureStoreSnapshot: Sendable {
    struct Operation: Sendable {
        var sequence: Int64
        var table: TableName
        var itemID: ItemID
        var kind: OperationKind
        var item: JSONValue?
    }

    struct OperationErrorRecord: Sendable {
        var operationSequence: Int64
        var status: Int
        var message: String?
        var item: JSONValue?
        var serverItem: JSONValue?
    }

    var uuid: String
    var rows: [(table: TableName, items: [JSONValue])]
    var deletedRowsLeftOut: Int
    var operations: [Operation]
    var errors: [OperationErrorRecord]
    var errorsLeftOut: Int
    var positions: [(table: TableName, queryID: QueryID, since: WireDate)]

    typealias ImportError = AzureMobileAppsImport.ImportError

    func write(into writer: LocalStoreWriter) throws -> AzureMobileAppsImport.Summary {
        if let earlier = try writer.setting(SQLiteLocalStore.azureImportKey) {
            guard var summary = try? JSONDecoder().decode(AzureMobileAppsImport.Summary.self, from: Data(earlier.utf8))
            else {
                throw ImportError(code: .otherStoreImported, message: "This store records an import it cannot read")
            }
            guard summary.storeUUID == uuid else {
                throw ImportError(
                    code: .otherStoreImported,
                    message: "This store holds the import of another Azure Mobile Apps store (\(summary.storeUUID))")
            }
            summary.alreadyImported = true
            return summary
        }
        try checkEmpty(writer)
        var summary = AzureMobileAppsImport.Summary(
            storeUUID: uuid, rows: [:], deletedRowsLeftOut: deletedRowsLeftOut, operations: [:], errors: 0,
            errorsLeftOut: errorsLeftOut, positions: [], alreadyImported: false)
        for (table, items) in rows {
            try writer.prepareTable(table)
            for item in items { try writer.upsert(item, in: table) }
            summary.rows[table.rawValue] = items.count
        }
        var carried: [Int64: PendingOperation] = [:]
        for operation in operations {
            carried[operation.sequence] = try writer.enqueue(
                operation.kind, itemID: operation.itemID, in: operation.table, item: operation.item)
            summary.operations[operation.kind, default: 0] += 1
        }
        for error in errors {
            guard let operation = carried[error.operationSequence] else {
                summary.errorsLeftOut += 1  // its operation was pushed or cancelled meanwhile
                continue
            }
            try writer.saveError(
                OperationError(
                    operation: operation, status: error.status, message: error.message,
                    sentItem: operation.kind == .delete ? nil : error.item, serverItem: error.serverItem))
            summary.errors += 1
        }
        for position in positions {
            try writer.setCursor(
                PullCursor(updatedAt: position.since, itemID: nil), for: position.table, queryID: position.queryID)
            summary.positions.append(
                .init(table: position.table.rawValue, queryID: position.queryID.rawValue, since: position.since))
        }
        let record = String(decoding: try JSONEncoder().encode(summary), as: UTF8.self)
        try writer.setSetting(record, for: SQLiteLocalStore.azureImportKey)
        return summary
    }

    private func checkEmpty(_ writer: LocalStoreWriter) throws {
        var held: [String] = []
        for (table, _) in rows where try writer.hasRowTable(table) {
            if try writer.count(in: table, matching: nil) > 0 { held.append("rows of \(table)") }
        }
        if try writer.operationCount(in: nil) > 0 { held.append("pending operations") }
        if try !writer.operationErrors().isEmpty { held.append("operation errors") }
        if try Int.fetchOne(writer.db, sql: "SELECT count(*) FROM \"sync_cursors\"") ?? 0 > 0 {
            held.append("pull positions")
        }
        guard held.isEmpty else {
            throw ImportError(
                code: .storeNotEmpty,
                message: "Import into a new store: this one holds \(held.joined(separator: ", ")) already")
        }
    }
}
