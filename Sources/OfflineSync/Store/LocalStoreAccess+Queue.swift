import GRDB
import SyncCore

/// The operation queue, its parked errors and the items to fetch again, in the store's tables.
extension LocalStoreReader {
    private static let operationColumns =
        "\"id\", \"tableName\", \"itemID\", \"kind\", \"item\", \"attempt\", \"recreatesItem\", \"base\", \"changeSet\""

    private func operation(_ row: Row) throws -> PendingOperation {
        let itemText: String? = row["item"]
        let attemptText: String? = row["attempt"]
        let baseText: String? = row["base"]
        let kindText: String = row["kind"]
        // Never guessed: an operation of a kind this version does not know (a newer SDK wrote it) is not sent as
        // something else.
        guard let kind = OperationKind(rawValue: kindText) else {
            throw LocalStoreError(
                operation: "read the queue",
                underlying: ValueError(
                    kind: "operation kind",
                    reason: "operation \(row["id"] as Int64) is '\(kindText.prefix(20))', not insert, update or delete "
                        + "(a newer version of the SDK wrote it?)"))
        }
        return PendingOperation(
            id: row["id"], table: try TableName(row["tableName"] as String),
            itemID: try ItemID(row["itemID"] as String),
            kind: kind,
            item: try itemText.map { try JSONValue(parsing: $0) },
            attempt: try attemptText.map { try OperationCoding.attempt(from: try JSONValue(parsing: $0)) },
            recreatesItem: row["recreatesItem"], base: try baseText.map { try JSONValue(parsing: $0) },
            changeSet: row["changeSet"])
    }

    /// Pending operations in queue order, after `sequence` when given, at most `limit` of them.
    func operations(after sequence: Int64?, limit: Int?) throws -> [PendingOperation] {
        let rows = try Row.fetchAll(
            db,
            sql: "SELECT \(Self.operationColumns) FROM \"sync_operations\" WHERE \"id\" > ? ORDER BY \"id\" LIMIT ?",
            arguments: [sequence ?? Int64.min, limit ?? -1])
        return try rows.map(operation)
    }

    /// The operation at queue position `id`, or nil when it is no longer queued.
    func operation(_ id: Int64) throws -> PendingOperation? {
        let statement = try db.cachedStatement(
            sql: "SELECT \(Self.operationColumns) FROM \"sync_operations\" WHERE \"id\" = ?")
        return try Row.fetchOne(statement, arguments: [id]).map(operation)
    }

    /// The item's pending operations, in queue order.
    func operations(for id: ItemID, in table: TableName) throws -> [PendingOperation] {
        let statement = try db.cachedStatement(
            sql:
                "SELECT \(Self.operationColumns) FROM \"sync_operations\" WHERE \"tableName\" = ? AND \"itemID\" = ? ORDER BY \"id\""
        )
        return try Row.fetchAll(statement, arguments: [table.canonical, id.rawValue]).map(operation)
    }

    /// The item's last pending operation, or nil.
    func lastOperation(for id: ItemID, in table: TableName) throws -> PendingOperation? {
        let statement = try db.cachedStatement(
            sql:
                "SELECT \(Self.operationColumns) FROM \"sync_operations\" WHERE \"tableName\" = ? AND \"itemID\" = ? ORDER BY \"id\" DESC LIMIT 1"
        )
        return try Row.fetchOne(statement, arguments: [table.canonical, id.rawValue]).map(operation)
    }

    /// The ids of a table's items that have pending operations.
    func itemIDsWithOperations(in table: TableName) throws -> Set<ItemID> {
        Set(
            try String.fetchAll(
                db, sql: "SELECT DISTINCT \"itemID\" FROM \"sync_operations\" WHERE \"tableName\" = ?",
                arguments: [table.canonical]
            ).compactMap(ItemID.init(rawValue:)))
    }

    /// How many operations are pending, in one table or in all.
    func operationCount(in table: TableName?) throws -> Int {
        if let table {
            return try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM \"sync_operations\" WHERE \"tableName\" = ?",
                arguments: [table.canonical]) ?? 0
        }
        return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \"sync_operations\"") ?? 0
    }

    /// The items of a table that must be fetched again from the server, because an operation left
    /// the queue without a server reply (PROTOCOL.md §5).
    func itemsToRefetch(in table: TableName) throws -> [ItemID] {
        try String.fetchAll(
            db, sql: "SELECT \"itemID\" FROM \"sync_refetch\" WHERE \"tableName\" = ? ORDER BY \"itemID\"",
            arguments: [table.canonical]
        ).map { try ItemID($0) }
    }

    /// Every kept operation error, in queue order.
    func operationErrors() throws -> [OperationError] {
        try Row.fetchAll(db, sql: "SELECT * FROM \"sync_errors\" ORDER BY \"operationID\"").map { row in
            let operationJSON = try JSONValue(parsing: row["operation"] as String)
            let texts: [String?] = [row["sentItem"], row["serverItem"]]
            let parsed = try texts.map { try $0.map { try JSONValue(parsing: $0) } }
            return OperationError(
                operation: try OperationCoding.operation(from: operationJSON), status: row["status"],
                message: row["message"], sentItem: parsed[0], serverItem: parsed[1])
        }
    }
}

extension LocalStoreWriter {
    /// Appends an operation to the queue, giving it the next sequence number; an update with its base row; in a
    /// change set, with the set.
    func enqueue(
        _ kind: OperationKind, itemID: ItemID, in table: TableName, item: JSONValue?, base: JSONValue? = nil,
        changeSet: Int64? = nil
    ) throws -> PendingOperation {
        try db.cachedStatement(
            sql: """
                INSERT INTO "sync_operations" ("tableName", "itemID", "kind", "item", "base", "changeSet")
                VALUES (?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            table.canonical, itemID.rawValue, kind.rawValue, item?.serialized(), base?.serialized(), changeSet,
        ])
        return PendingOperation(
            id: db.lastInsertedRowID, table: table, itemID: itemID, kind: kind, item: item, base: base,
            changeSet: changeSet)
    }

    /// A number for a new change set: greater than that of every set still queued.
    func newChangeSet() throws -> Int64 {
        (try Int64.fetchOne(db, sql: #"SELECT MAX("changeSet") FROM "sync_operations""#) ?? 0) + 1
    }

    /// Saves an operation's changed kind, item, attempt or re-creation mark.
    func updateOperation(_ operation: PendingOperation) throws {
        try db.execute(
            sql: """
                UPDATE "sync_operations" SET "kind" = ?, "item" = ?, "attempt" = ?, "recreatesItem" = ?, "base" = ?
                WHERE "id" = ?
                """,
            arguments: [
                operation.kind.rawValue, operation.item?.serialized(),
                operation.attempt.map { OperationCoding.json($0).serialized() }, operation.recreatesItem,
                operation.base?.serialized(), operation.id,
            ])
    }

    /// Removes an operation and its error.
    func removeOperation(_ id: Int64) throws {
        try db.execute(sql: "DELETE FROM \"sync_operations\" WHERE \"id\" = ?", arguments: [id])
        try removeError(operationID: id)
    }

    /// Removes every operation of a table, and their errors.
    func removeOperations(in table: TableName) throws {
        try db.execute(
            sql:
                "DELETE FROM \"sync_errors\" WHERE \"operationID\" IN (SELECT \"id\" FROM \"sync_operations\" WHERE \"tableName\" = ?)",
            arguments: [table.canonical])
        try db.execute(sql: "DELETE FROM \"sync_operations\" WHERE \"tableName\" = ?", arguments: [table.canonical])
    }

    /// Notes that an item must be fetched again from the server (see
    /// ``LocalStoreReader/itemsToRefetch(in:)``).
    func markForRefetch(_ id: ItemID, in table: TableName) throws {
        try db.execute(
            sql: "INSERT OR IGNORE INTO \"sync_refetch\" (\"tableName\", \"itemID\") VALUES (?, ?)",
            arguments: [table.canonical, id.rawValue])
    }

    /// Forgets that an item must be fetched again.
    func removeRefetch(_ id: ItemID, in table: TableName) throws {
        try db.execute(
            sql: "DELETE FROM \"sync_refetch\" WHERE \"tableName\" = ? AND \"itemID\" = ?",
            arguments: [table.canonical, id.rawValue])
    }

    /// Keeps (or replaces) the error of an operation.
    func saveError(_ error: OperationError) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO "sync_errors" ("operationID", "operation", "status", "message", "sentItem", "serverItem")
                VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                error.operation.id, OperationCoding.json(error.operation).serialized(), error.status, error.message,
                error.sentItem?.serialized(), error.serverItem?.serialized(),
            ])
    }

    /// Removes the error of an operation.
    func removeError(operationID: Int64) throws {
        try db.execute(sql: "DELETE FROM \"sync_errors\" WHERE \"operationID\" = ?", arguments: [operationID])
    }
}
