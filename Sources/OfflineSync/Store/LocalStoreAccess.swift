import GRDB
import SyncCore
import SyncOData
import SyncSQL
import SyncSQLite

/// What ``SQLiteLocalStore`` lets its callers read: one of its `Database` connections, inside a read or transaction
/// that GRDB holds open for the duration of the call (valid only during it).
class LocalStoreReader {
    let db: Database
    let store: SQLiteLocalStore

    init(db: Database, store: SQLiteLocalStore) {
        self.db = db
        self.store = store
    }

    /// Row tables this transaction found or made (the store learns them once it commits).
    private var found: Set<String> = []

    /// Whether the sync table has a row table yet (reads of a table never written are empty).
    func hasRowTable(_ table: TableName) throws -> Bool {
        if found.contains(table.canonical) || store.knownTables.withLock({ $0.contains(table.canonical) }) {
            return true
        }
        // Not `db.tableExists`: GRDB's schema cache can outlive a rolled-back CREATE TABLE.
        let statement = try db.cachedStatement(sql: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
        guard try Bool.fetchOne(statement, arguments: ["rows_\(table.canonical)"]) != nil else { return false }
        remember(table)
        return true
    }

    /// Caches that the row table exists — in a write, only once the transaction commits: a table
    /// created by a transaction that rolls back (a refused first batch) does not exist afterwards.
    fileprivate func remember(_ table: TableName) {
        // Once per transaction: a callback per row written made a first write of 4,000 rows take seconds.
        guard found.insert(table.canonical).inserted else { return }
        let known = store.knownTables
        if db.configuration.readonly {
            known.withLock { _ = $0.insert(table.canonical) }
        } else {
            db.afterNextTransaction(onCommit: { _ in known.withLock { _ = $0.insert(table.canonical) } })
        }
    }

    /// One item, or nil.
    func item(_ id: ItemID, in table: TableName) throws -> JSONValue? {
        guard try hasRowTable(table) else { return nil }
        let statement = try db.cachedStatement(
            sql: "SELECT \"data\" FROM \(SQLiteLocalStore.rowTable(table)) WHERE \"id\" = ?")
        return try String.fetchOne(statement, arguments: [id.rawValue]).map { try JSONValue(parsing: $0) }
    }

    /// Whether the item exists (cheaper than reading it).
    func containsItem(_ id: ItemID, in table: TableName) throws -> Bool {
        guard try hasRowTable(table) else { return false }
        let statement = try db.cachedStatement(
            sql: "SELECT 1 FROM \(SQLiteLocalStore.rowTable(table)) WHERE \"id\" = ?")
        return try Bool.fetchOne(statement, arguments: [id.rawValue]) != nil
    }

    /// The items matching a query's filter, in its order (then by id), with its skip and top.
    func items(in table: TableName, matching query: ODataQuery) throws -> [JSONValue] {
        guard try hasRowTable(table) else { return [] }
        let (whereSQL, orderSQL, arguments) = try LocalQueryTranslation.clauses(query)
        var sql = "SELECT \"data\" FROM \(SQLiteLocalStore.rowTable(table)) WHERE \(whereSQL) ORDER BY \(orderSQL)"
        var values = arguments
        if query.top != nil || query.skip != nil {
            sql += " LIMIT ? OFFSET ?"
            values.append(.int(Int64(query.top ?? -1)))
            values.append(.int(Int64(query.skip ?? 0)))
        }
        // Cached: an app runs the same few query shapes again and again.
        let texts = try String.fetchCursor(
            db.cachedStatement(sql: sql), arguments: StatementArguments(sqlValues: values))
        var items: [JSONValue] = []
        while let text = try texts.next() { items.append(try JSONValue(parsing: text)) }
        return items
    }

    /// How many items match `filter` (all items when nil).
    func count(in table: TableName, matching filter: ODataExpression?) throws -> Int {
        guard try hasRowTable(table) else { return 0 }
        let (whereSQL, _, arguments) = try LocalQueryTranslation.clauses(ODataQuery(filter: filter))
        return try Int.fetchOne(
            db, sql: "SELECT COUNT(*) FROM \(SQLiteLocalStore.rowTable(table)) WHERE \(whereSQL)",
            arguments: StatementArguments(sqlValues: arguments)) ?? 0
    }

    /// The newest server stamp this store holds of `table`: the latest of its pull cursors and of its rows'
    /// `updatedAt` (each one the server's, read before now); nil when it holds none. A write the server applies after
    /// now is stamped later (``PendingOperation/Attempt/floor``).
    func newestServerStamp(in table: TableName) throws -> WireDate? {
        let cursor = try Int64.fetchOne(
            db, sql: #"SELECT max("updatedAt") FROM "sync_cursors" WHERE "tableName" = ?"#,
            arguments: [table.canonical]
        ).map(WireDate.init(millisecondsSince1970:))
        guard try hasRowTable(table) else { return cursor }
        // Wire dates of one precision, as servers stamp them: their text sorts as their instants.
        let row = try String.fetchOne(
            db, sql: "SELECT max(\"updatedAt\") FROM \(SQLiteLocalStore.rowTable(table))"
        ).flatMap(WireDate.init(parsing:))
        return [cursor, row].compactMap { $0 }.max()
    }

    /// The cursor of an incremental pull, or nil before its first page.
    func cursor(for table: TableName, queryID: QueryID) throws -> PullCursor? {
        guard
            let row = try Row.fetchOne(
                db,
                sql:
                    "SELECT \"updatedAt\", \"itemID\" FROM \"sync_cursors\" WHERE \"tableName\" = ? AND \"queryID\" = ?",
                arguments: [table.canonical, queryID.rawValue])
        else { return nil }
        let id: String = row["itemID"]  // empty: from that instant on
        return PullCursor(
            updatedAt: WireDate(millisecondsSince1970: row["updatedAt"]), itemID: id.isEmpty ? nil : try ItemID(id))
    }

    /// A stored setting (such as the installation id), or nil.
    func setting(_ key: String) throws -> String? {
        try String.fetchOne(db, sql: "SELECT \"value\" FROM \"sync_settings\" WHERE \"key\" = ?", arguments: [key])
    }
}

/// What ``SQLiteLocalStore`` lets a write transaction change, beside what it reads.
final class LocalStoreWriter: LocalStoreReader {
    /// Creates the table's rows table if it has none yet (so that an observation of the table sees its first row).
    func prepareTable(_ table: TableName) throws {
        try ensureRowTable(table)
    }

    private func ensureRowTable(_ table: TableName) throws {
        guard try !hasRowTable(table) else { return }
        let name = SQLiteLocalStore.rowTable(table)
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS \(name) ("id" TEXT PRIMARY KEY NOT NULL, "updatedAt" TEXT, "data" TEXT NOT NULL);
                CREATE INDEX IF NOT EXISTS "rows_\(table.canonical)_updatedAt" ON \(name) ("updatedAt");
                """)
        remember(table)
    }

    /// Inserts or replaces an item (by its `id`).
    func upsert(_ item: JSONValue, in table: TableName) throws {
        guard let id = item.itemID else { throw ValueError(kind: "item", reason: "it has no valid id") }
        try ensureRowTable(table)
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO \(SQLiteLocalStore.rowTable(table)) ("id", "updatedAt", "data") VALUES (?, ?, ?)
                ON CONFLICT ("id") DO UPDATE SET "updatedAt" = excluded."updatedAt", "data" = excluded."data"
                """)
        try statement.execute(arguments: [id.rawValue, item["updatedAt"]?.stringValue, item.serialized()])
    }

    /// What applies a pulled page's rows: its statements prepared once for the page (the row table made if needed).
    func pulledRows(in table: TableName) throws -> PulledRows {
        try ensureRowTable(table)
        let rows = SQLiteLocalStore.rowTable(table)
        return PulledRows(
            db: db,
            upsert: try db.cachedStatement(
                sql: """
                    INSERT INTO \(rows) ("id", "updatedAt", "data") VALUES (?1, ?2, ?3)
                    ON CONFLICT ("id") DO UPDATE SET "updatedAt" = excluded."updatedAt", "data" = excluded."data"
                    WHERE ?4 IS NULL OR json_extract("data", '$.version') IS NOT ?4
                    """),
            delete: try db.cachedStatement(sql: "DELETE FROM \(rows) WHERE \"id\" = ?"))
    }

    /// Removes an item; nothing happens when it is absent.
    func deleteItem(_ id: ItemID, in table: TableName) throws {
        guard try hasRowTable(table) else { return }
        try db.cachedStatement(sql: "DELETE FROM \(SQLiteLocalStore.rowTable(table)) WHERE \"id\" = ?")
            .execute(arguments: [id.rawValue])
    }

    /// Removes the items matching `filter` (all when nil) whose ids are in neither `kept` nor `spared` (compared by
    /// bytes), and says how many.
    func removeItems(
        in table: TableName, notIn kept: Set<ItemID>, sparing spared: Set<ItemID>,
        matching filter: ODataExpression? = nil
    ) throws -> Int {
        guard try hasRowTable(table) else { return 0 }
        let rows = SQLiteLocalStore.rowTable(table)
        let delete = try db.cachedStatement(sql: "DELETE FROM \(rows) WHERE \"id\" = ?")
        let (whereSQL, _, arguments) = try LocalQueryTranslation.clauses(ODataQuery(filter: filter))
        var removed = 0
        for text in try String.fetchAll(
            db, sql: "SELECT \"id\" FROM \(rows) WHERE \(whereSQL)", arguments: StatementArguments(sqlValues: arguments)
        ) {
            if let id = try? ItemID(text), kept.contains(id) || spared.contains(id) { continue }
            try delete.execute(arguments: [text])
            removed += 1
        }
        return removed
    }

    /// Removes the items matching `filter` (all items when nil).
    func deleteItems(in table: TableName, matching filter: ODataExpression?) throws {
        guard try hasRowTable(table) else { return }
        let (whereSQL, _, arguments) = try LocalQueryTranslation.clauses(ODataQuery(filter: filter))
        try db.execute(
            sql: "DELETE FROM \(SQLiteLocalStore.rowTable(table)) WHERE \(whereSQL)",
            arguments: StatementArguments(sqlValues: arguments))
    }

    /// Sets or clears the cursor of an incremental pull. Setting never moves an existing cursor back
    /// (two clients pulling one store at once must not make a third re-read what both applied).
    func setCursor(_ cursor: PullCursor?, for table: TableName, queryID: QueryID) throws {
        guard let cursor else {
            try db.execute(
                sql: "DELETE FROM \"sync_cursors\" WHERE \"tableName\" = ? AND \"queryID\" = ?",
                arguments: [table.canonical, queryID.rawValue])
            return
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO "sync_cursors" ("tableName", "queryID", "updatedAt", "itemID") VALUES (?, ?, ?, ?)
                ON CONFLICT ("tableName", "queryID") DO UPDATE SET "updatedAt" = excluded."updatedAt", "itemID" = excluded."itemID"
                WHERE excluded."updatedAt" > "updatedAt" OR (excluded."updatedAt" = "updatedAt" AND excluded."itemID" > "itemID")
                """
        ).execute(arguments: [
            table.canonical, queryID.rawValue, cursor.updatedAt.millisecondsSince1970, cursor.itemID?.rawValue ?? "",
        ])
    }

    /// Clears every cursor of a table.
    func removeCursors(in table: TableName) throws {
        try db.execute(sql: "DELETE FROM \"sync_cursors\" WHERE \"tableName\" = ?", arguments: [table.canonical])
    }

    /// Stores or clears a setting.
    func setSetting(_ value: String?, for key: String) throws {
        if let value {
            try db.execute(
                sql: "INSERT OR REPLACE INTO \"sync_settings\" (\"key\", \"value\") VALUES (?, ?)",
                arguments: [key, value])
        } else {
            try db.execute(sql: "DELETE FROM \"sync_settings\" WHERE \"key\" = ?", arguments: [key])
        }
    }
}
