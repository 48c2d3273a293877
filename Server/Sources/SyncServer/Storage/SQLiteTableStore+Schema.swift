import GRDB
import SyncCore
import SyncSQL
import SyncSQLite

extension SQLiteTableStore {
    /// Creates the table if needed, adds declared columns it lacks, and returns its schema.
    static func prepare(_ configuration: TableConfiguration, in db: Database) throws -> TableSchema {
        let table = StoreSQL.quoted(configuration.name.canonical)
        var columns = try storedColumns(of: configuration.name, in: db)
        if columns == nil {
            try db.execute(
                sql: """
                    CREATE TABLE \(table) (
                        "id" TEXT PRIMARY KEY NOT NULL,
                        "createdAt" INTEGER NOT NULL,
                        "updatedAt" INTEGER NOT NULL,
                        "version" TEXT NOT NULL,
                        "deleted" INTEGER NOT NULL DEFAULT 0
                    )
                    """)
            try db.execute(
                sql:
                    "CREATE INDEX \(StoreSQL.quoted(configuration.name.canonical + "_cursor")) ON \(table) (\"updatedAt\", \"id\")"
            )
            columns = [:]
        }
        var schema = TableSchema(configuration: configuration, columns: columns ?? [:])
        for (name, type) in configuration.columns ?? [:] where schema.columns[name] != type {
            if schema.columns[name] == nil {
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN \(StoreSQL.quoted(name)) \(sqlType(type))")
            }
            schema.columns[name] = type
        }
        if let owner = configuration.scopeColumn {
            if try schema.lacksTextColumn(owner, for: "a scoped table") {
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN \(StoreSQL.quoted(owner)) TEXT")
                schema.columns[owner] = .string
            }
            // The owner-scoped pull: the owner's rows in cursor order.
            try db.execute(
                sql: "CREATE INDEX IF NOT EXISTS \(StoreSQL.quoted(configuration.name.canonical + "_owner")) "
                    + "ON \(table) (\(StoreSQL.quoted(owner)), \"updatedAt\", \"id\")")
        }
        for column in configuration.attachmentColumns {
            if try schema.lacksTextColumn(column, for: "an attachment column") {
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN \(StoreSQL.quoted(column)) TEXT")
                schema.columns[column] = .string
            }
            try db.execute(
                sql: "CREATE INDEX IF NOT EXISTS \(StoreSQL.quoted(configuration.attachmentIndex(column))) "
                    + "ON \(table) (\(StoreSQL.quoted(column)))")
        }
        if configuration.tombstoneRetention != nil {
            // The tombstones in the order the collector removes them, without the live rows between.
            try db.execute(
                sql: "CREATE INDEX IF NOT EXISTS \(StoreSQL.quoted(configuration.name.canonical + "_gone")) "
                    + "ON \(table) (\"updatedAt\") WHERE \"deleted\" = 1")
        }
        try prepareCollationKeys(configuration, in: db)
        try prepareExitTrigger(configuration, in: db)
        try save(schema, in: db)
        return schema
    }

    /// Makes the trigger that records a move of a shared table's row out of its group (``ScopeExits``), or drops it
    /// from a table that no longer has groups.
    static func prepareExitTrigger(_ configuration: TableConfiguration, in db: Database) throws {
        let trigger = StoreSQL.quoted(ScopeExits.triggerName(configuration.name))
        try db.execute(sql: "DROP TRIGGER IF EXISTS \(trigger)")
        guard let group = configuration.groupColumn.map(StoreSQL.quoted) else { return }
        let name = configuration.name.canonical
        try db.execute(
            sql: """
                CREATE TRIGGER \(trigger) AFTER UPDATE OF \(group) ON \(StoreSQL.quoted(name))
                WHEN OLD.\(group) IS NOT NULL AND OLD.\(group) IS NOT NEW.\(group)
                BEGIN
                    INSERT INTO "\(ScopeExits.table)" ("table", "group", "stamp") VALUES ('\(name)', OLD.\(group), NEW."updatedAt")
                    ON CONFLICT ("table", "group") DO UPDATE SET "stamp" = MAX("stamp", excluded."stamp");
                END
                """)
    }

    /// Adds the collation key columns of the table's collated columns, and computes every key that is missing or
    /// stale (a row written while the column's collation was binary, or before Swift's Unicode tables changed).
    static func prepareCollationKeys(_ configuration: TableConfiguration, in db: Database) throws {
        guard !configuration.collatedColumns.isEmpty else { return }
        let table = StoreSQL.quoted(configuration.name.canonical)
        let existing = Set(try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))").map { $0["name"] as String })
        for column in configuration.collatedColumns {
            let keyColumn = TableConfiguration.collationKeyColumn(column)
            if !existing.contains(keyColumn) {
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN \(StoreSQL.quoted(keyColumn)) TEXT")
            }
            let collation = configuration.collation(of: column)
            let rows = try Row.fetchAll(
                db, sql: "SELECT \"id\", \(StoreSQL.quoted(column)), \(StoreSQL.quoted(keyColumn)) FROM \(table)")
            for row in rows {
                let key = (row[1] as String?).flatMap(collation.key)
                guard key != row[2] as String? else { continue }
                try db.execute(
                    sql: "UPDATE \(table) SET \(StoreSQL.quoted(keyColumn)) = ? WHERE \"id\" = ?",
                    arguments: [key, row[0] as String])
            }
        }
    }

    /// The user columns recorded for a table, or nil when the table was never created.
    static func storedColumns(of table: TableName, in db: Database) throws -> [String: SQLColumnType]? {
        guard
            let text = try String.fetchOne(
                db.cachedStatement(sql: "SELECT \"columns\" FROM \"__sync_tables\" WHERE \"name\" = ?"),
                arguments: [table.canonical])
        else { return nil }
        if let columns = parsedColumns.withLock({ $0[text] }) { return columns }
        guard case .object(let members) = try JSONValue(parsing: text) else { return [:] }
        let columns = members.compactMapValues { $0.stringValue.flatMap(SQLColumnType.init(rawValue:)) }
        parsedColumns.withLock { cache in
            if cache.count >= 256 { cache.removeAll() }
            cache[text] = columns
        }
        return columns
    }

    /// The columns of each recorded text, parsed once: every page read checks the recorded columns (a write of
    /// another store may have added one), and parsing them took a seventh of the server's time per page.
    private static let parsedColumns = Locked<[String: [String: SQLColumnType]]>([:])

    /// The schema as this transaction sees the table: the cached one with the columns the database records, which
    /// may be more when a write committed a new column before the cache learnt it (another store on the file, or
    /// a write of this one still publishing). Rows read with the cached column list alone would lack those fields.
    static func committedSchema(_ cached: TableSchema, in db: Database) throws -> TableSchema {
        guard let stored = try storedColumns(of: cached.name, in: db), stored != cached.columns else { return cached }
        var schema = cached
        schema.columns.merge(stored) { _, stored in stored }
        return schema
    }

    static func save(_ schema: TableSchema, in db: Database) throws {
        let columns = JSONValue.object(schema.columns.mapValues { .string($0.rawValue) })
        try db.execute(
            sql: """
                INSERT INTO "__sync_tables" ("name", "displayName", "columns") VALUES (?, ?, ?)
                ON CONFLICT ("name") DO UPDATE SET "displayName" = excluded."displayName", "columns" = excluded."columns"
                """,
            arguments: [schema.name.canonical, schema.name.rawValue, columns.serialized()])
    }

    /// Applies a write plan's schema changes inside the write transaction. `current` is the schema this
    /// transaction sees (``committedSchema(_:in:)``), which the plan was made against.
    /// Returns the schema after the changes.
    static func applySchemaChanges(_ plan: WritePlan, to current: TableSchema, in db: Database) throws -> TableSchema {
        for (name, type) in plan.newColumns {
            try db.execute(
                sql:
                    "ALTER TABLE \(StoreSQL.quoted(current.name.canonical)) ADD COLUMN \(StoreSQL.quoted(name)) \(sqlType(type))"
            )
        }
        let updated = current.applying(plan)
        try save(updated, in: db)
        return updated
    }

    static func sqlType(_ type: SQLColumnType) -> String {
        switch type {
        case .string, .json, .dynamic: "TEXT"
        case .integer, .bool, .date: "INTEGER"
        case .double: "REAL"
        }
    }
}
