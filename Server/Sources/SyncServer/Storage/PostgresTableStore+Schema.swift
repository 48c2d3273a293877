import Logging
import PostgresNIO
public import SyncCore
import SyncSQL

extension PostgresTableStore {
    /// The advisory lock that serializes bookkeeping migrations and table creation across instances.
    static let schemaLockKey: Int64 = 0x4f66_666c_5379_6e63  // "OfflSync"

    /// PostgreSQL truncates identifiers longer than this many bytes.
    static let maximumIdentifierLength = 63

    /// The store's own bookkeeping, versioned: each instance applies the missing steps in order, under
    /// the schema lock. Never touches the user tables' rows.
    static let migrations: [(version: Int, name: String, sql: String)] =
        [
            (
                1, "table registry",
                """
                CREATE TABLE "__sync_tables" (
                    "name" text COLLATE "C" PRIMARY KEY,
                    "displayName" text NOT NULL,
                    "columns" text NOT NULL,
                    "lastStamp" bigint NOT NULL DEFAULT 0
                )
                """
            ),
            (
                2, "owner stamps",
                """
                CREATE TABLE "__sync_owner_stamps" (
                    "table" text COLLATE "C" NOT NULL,
                    "owner" text COLLATE "C" NOT NULL,
                    "lastStamp" bigint NOT NULL,
                    PRIMARY KEY ("table", "owner")
                )
                """
            ),
            (3, "outbox", CommitOutbox.createSQL(sequence: "bigserial PRIMARY KEY")),
            (4, "scope exits", ScopeExits.createSQL(stamp: "bigint")),
            (
                5, "scope exit trigger",
                """
                CREATE FUNCTION "__sync_record_exit"() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE
                    "left" text := to_jsonb(OLD) ->> TG_ARGV[0];
                BEGIN
                    IF "left" IS NOT NULL AND "left" IS DISTINCT FROM (to_jsonb(NEW) ->> TG_ARGV[0]) THEN
                        INSERT INTO "__sync_scope_exits" ("table", "group", "stamp")
                        VALUES (TG_TABLE_NAME, "left", NEW."updatedAt")
                        ON CONFLICT ("table", "group")
                        DO UPDATE SET "stamp" = GREATEST("__sync_scope_exits"."stamp", EXCLUDED."stamp");
                    END IF;
                    RETURN NULL;
                END
                $$
                """
            ),
        ]
        + PostgresAttachmentStore.migrations.enumerated().map { (6 + $0.offset, $0.element.name, $0.element.sql) }
        + [
            (
                6 + PostgresAttachmentStore.migrations.count, "integer ids",
                #"ALTER TABLE "__sync_tables" ADD COLUMN "lastID" bigint NOT NULL DEFAULT 0"#
            ),
            (
                7 + PostgresAttachmentStore.migrations.count, "tombstone horizons",
                #"ALTER TABLE "__sync_tables" ADD COLUMN "horizon" bigint"#
            ),
            (
                8 + PostgresAttachmentStore.migrations.count, "removed ids",
                #"CREATE TABLE "__sync_removed" ("table" text NOT NULL, "id" text NOT NULL, "stamp" bigint NOT NULL, PRIMARY KEY ("table", "id"))"#
            ),
            (
                9 + PostgresAttachmentStore.migrations.count, "removed ids by stamp",
                #"CREATE INDEX "__sync_removed_stamp" ON "__sync_removed" ("table", "stamp")"#
            ),
            (
                10 + PostgresAttachmentStore.migrations.count, "forgotten removals",
                #"ALTER TABLE "__sync_tables" ADD COLUMN "forgotten" bigint"#
            ),
        ]

    public func prepare(_ tables: [TableConfiguration]) async throws {
        for configuration in tables {
            let length = configuration.name.canonical.utf8.count + "_cursor".count
            guard length <= Self.maximumIdentifierLength else {
                throw TableStoreError.unavailable(
                    "table name '\(configuration.name)' is too long for PostgreSQL (at most 56 characters)")
            }
        }
        let logger = self.logger
        // Startup work: the pool's first connections may take longer than a request would wait, and
        // indexes on large tables longer than a request may run.
        let schemas = try await transaction(timeout: max(connectionTimeout, .seconds(30)), queryTimeout: .seconds(600))
        {
            connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.schemaLockKey))", logger: logger)
            try await Self.migrate(connection, logger: logger)
            var schemas: [TableSchema] = []
            for configuration in tables {
                schemas.append(try await Self.prepare(configuration, on: connection, logger: logger))
            }
            return schemas
        }
        for schema in schemas { self.publish(schema) }
    }

    public func checkReady() async throws {
        let logger = self.logger
        let newest = try await withConnection { connection in
            let rows = try await connection.query(#"SELECT max("version") FROM "__sync_migrations""#, logger: logger)
            for try await version in rows.decode(Int?.self) { return version ?? 0 }
            return 0
        }
        guard newest == Self.migrations.count else {
            throw TableStoreError.unavailable(
                "the database's bookkeeping is version \(newest); this server's is \(Self.migrations.count)")
        }
    }

    public func schema(of table: TableName) async throws -> TableSchema? {
        schemas.schema(of: table)
    }

    public func nextIntegerID(in table: TableName) async throws -> Int64 {
        let schema = try schemas.require(table)
        let logger = self.logger
        return try await withConnection(isWrite: true) { connection in
            // Above the largest integer id stored too: seeded rows, and rows written before the counter. Ids other
            // instances give meanwhile are above the counter's value, which the update reads under its row lock.
            var largest: Int64 = 0
            let stored = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT max(\"id\") FROM \(StoreSQL.quoted(schema.name.canonical))"),
                logger: logger)
            for try await (text) in stored.decode(String?.self) { largest = text.flatMap(IntegerIDs.number) ?? 0 }
            guard largest < Int64.max else {
                throw TableStoreError.invalidItem("\(schema.name) has no integer id left")
            }
            let rows = try await connection.query(
                #"UPDATE "__sync_tables" SET "lastID" = GREATEST("lastID", \#(largest)) + 1 WHERE "name" = \#(schema.name.canonical) RETURNING "lastID""#,
                logger: logger)
            for try await next in rows.decode(Int64.self) { return next }
            throw TableStoreError.unknownTable(table)
        }
    }

    /// Applies the bookkeeping migrations this database lacks (the caller holds the schema lock).
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS "__sync_migrations" (
                "version" integer PRIMARY KEY,
                "name" text NOT NULL,
                "appliedAt" timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        var applied: Set<Int> = []
        for try await version in try await connection.query(
            #"SELECT "version" FROM "__sync_migrations""#, logger: logger
        ).decode(Int.self) {
            applied.insert(version)
        }
        if let newest = applied.max(), newest > migrations.count {
            throw TableStoreError.unavailable(
                "the database was set up by a newer sync-server (bookkeeping version \(newest); this one knows \(migrations.count))"
            )
        }
        for migration in migrations where !applied.contains(migration.version) {
            try await connection.query(PostgresQuery(unsafeSQL: migration.sql), logger: logger)
            try await connection.query(
                #"INSERT INTO "__sync_migrations" ("version", "name") VALUES (\#(migration.version), \#(migration.name))"#,
                logger: logger)
        }
    }

    /// Creates the table if needed, adds declared columns it lacks, and returns its schema.
    static func prepare(_ configuration: TableConfiguration, on connection: PostgresConnection, logger: Logger)
        async throws -> TableSchema
    {
        let name = configuration.name.canonical
        let table = StoreSQL.quoted(name)
        var columns = try await storedColumns(of: configuration.name, on: connection, logger: logger)
        if columns == nil {
            try await createTable(name, on: connection, logger: logger)
            columns = [:]
        }
        var schema = TableSchema(configuration: configuration, columns: columns ?? [:])
        for (column, type) in configuration.columns ?? [:] where schema.columns[column] != type {
            if schema.columns[column] == nil {
                try await addColumn(column, type, to: name, on: connection, logger: logger)
            }
            schema.columns[column] = type
        }
        if let owner = configuration.scopeColumn {
            try await ensureTextColumn(owner, of: &schema, for: "a scoped table", on: connection, logger: logger)
            // The owner-scoped pull: the owner's rows in cursor order (owners compared as bytes, as the stamps' rows).
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "CREATE INDEX IF NOT EXISTS \(StoreSQL.quoted(name + "_owner")) ON \(table) "
                        + "(\(StoreSQL.quoted(owner)), \"updatedAt\", \"id\")"),
                logger: logger)
        }
        for column in configuration.attachmentColumns {
            try await ensureTextColumn(column, of: &schema, for: "an attachment column", on: connection, logger: logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "CREATE INDEX IF NOT EXISTS \(StoreSQL.quoted(configuration.attachmentIndex(column))) "
                        + "ON \(table) (\(StoreSQL.quoted(column)))"),
                logger: logger)
        }
        if configuration.tombstoneRetention != nil {
            // The tombstones in the order the collector removes them, without the live rows between.
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "CREATE INDEX IF NOT EXISTS \(StoreSQL.quoted(name + "_gone")) ON \(table) "
                        + "(\"updatedAt\") WHERE \"deleted\""),
                logger: logger)
        }
        try await prepareCollationKeys(configuration, on: connection, logger: logger)
        // The move of a row out of its group, recorded for that group's members (ScopeExits); the group's name is the
        // trigger's argument, a quoted literal of a validated column name.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: configuration.groupColumn.map { group in
                    "CREATE OR REPLACE TRIGGER \"__sync_exit\" AFTER UPDATE ON \(table) FOR EACH ROW "
                        + "WHEN (OLD.\(StoreSQL.quoted(group)) IS DISTINCT FROM NEW.\(StoreSQL.quoted(group))) "
                        + "EXECUTE FUNCTION \"__sync_record_exit\"('\(group)')"
                } ?? "DROP TRIGGER IF EXISTS \"__sync_exit\" ON \(table)"),
            logger: logger)
        try await save(schema, on: connection, logger: logger)
        return schema
    }

    /// Creates a table with the system columns and the index of the pull's cursor.
    private static func createTable(_ name: String, on connection: PostgresConnection, logger: Logger) async throws {
        let table = StoreSQL.quoted(name)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    CREATE TABLE \(table) (
                        "id" text COLLATE "C" PRIMARY KEY,
                        "createdAt" bigint NOT NULL,
                        "updatedAt" bigint NOT NULL,
                        "version" text NOT NULL,
                        "deleted" boolean NOT NULL DEFAULT false
                    )
                    """), logger: logger)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: "CREATE INDEX \(StoreSQL.quoted(name + "_cursor")) ON \(table) (\"updatedAt\", \"id\")"),
            logger: logger)
    }

    /// Adds `column` as text when the table lacks it (``TableSchema/lacksTextColumn(_:for:)``).
    private static func ensureTextColumn(
        _ column: String, of schema: inout TableSchema, for purpose: String, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard try schema.lacksTextColumn(column, for: purpose) else { return }
        try await addColumn(column, .string, to: schema.name.canonical, on: connection, logger: logger)
        schema.columns[column] = .string
    }

    /// Adds the collation key columns of the table's collated columns (text compared as bytes), and computes every
    /// key that is missing or stale (a row written while the column's collation was binary, or before Swift's
    /// Unicode tables changed).
    static func prepareCollationKeys(
        _ configuration: TableConfiguration, on connection: PostgresConnection, logger: Logger
    ) async throws {
        let table = StoreSQL.quoted(configuration.name.canonical)
        for column in configuration.collatedColumns {
            let keyColumn = StoreSQL.quoted(TableConfiguration.collationKeyColumn(column))
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "ALTER TABLE \(table) ADD COLUMN IF NOT EXISTS \(keyColumn) text COLLATE \"C\""),
                logger: logger)
            let collation = configuration.collation(of: column)
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT \"id\", \(StoreSQL.quoted(column)), \(keyColumn) FROM \(table)"),
                logger: logger)
            var stale: [(id: String, key: String?)] = []
            for try await (id, text, key) in rows.decode((String, String?, String?).self) {
                let fresh = text.flatMap(collation.key)
                if fresh != key { stale.append((id, fresh)) }
            }
            for (id, key) in stale {
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "UPDATE \(table) SET \(keyColumn) = $1 WHERE \"id\" = $2",
                        binds: try bindings([key.map(SQLValue.text) ?? .null, .text(id)])),
                    logger: logger)
            }
        }
    }

    /// The user columns recorded for a table, or nil when the table was never created.
    static func storedColumns(of table: TableName, on connection: PostgresConnection, logger: Logger) async throws
        -> [String: SQLColumnType]?
    {
        let rows = try await connection.query(
            #"SELECT "columns" FROM "__sync_tables" WHERE "name" = \#(table.canonical)"#, logger: logger)
        for try await text in rows.decode(String.self) { return try columns(from: text) }
        return nil
    }

    /// Reads the JSON object of column types that `__sync_tables` keeps.
    static func columns(from text: String) throws -> [String: SQLColumnType] {
        guard case .object(let members) = try JSONValue(parsing: text) else { return [:] }
        return members.compactMapValues { $0.stringValue.flatMap(SQLColumnType.init(rawValue:)) }
    }

    static func save(_ schema: TableSchema, on connection: PostgresConnection, logger: Logger) async throws {
        let columns = JSONValue.object(schema.columns.mapValues { .string($0.rawValue) }).serialized()
        try await connection.query(
            """
            INSERT INTO "__sync_tables" ("name", "displayName", "columns") VALUES (\(schema.name.canonical), \(schema.name.rawValue), \(columns))
            ON CONFLICT ("name") DO UPDATE SET "displayName" = excluded."displayName", "columns" = excluded."columns"
            """, logger: logger)
    }

    /// Re-reads a table's columns from the database into the cache, for a request that names a
    /// field another instance may have added a moment ago.
    func reloadSchema(of table: TableName) async throws -> TableSchema {
        let cached = try schemas.require(table)
        let logger = self.logger
        let columns = try await withConnection { connection in
            try await Self.storedColumns(of: table, on: connection, logger: logger)
        }
        publish(TableSchema(configuration: cached.configuration, columns: columns ?? [:]))
        return try schemas.require(table)
    }

    /// Applies a write plan's schema changes inside the write transaction (the caller holds the
    /// table's bookkeeping row lock, so instances adding the same column take turns: the second sees
    /// the column and adds nothing). Returns the plan against the stored schema, and the new schema.
    static func applySchemaChanges(
        for fields: [String: JSONValue], schema current: TableSchema, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> (WritePlan, TableSchema) {
        let plan = try current.plan(fields)
        guard plan.changesSchema else { return (plan, current) }
        let table = current.name.canonical
        for (name, type) in plan.newColumns {
            try await addColumn(name, type, to: table, on: connection, logger: logger)
        }
        for name in plan.widenedColumns {
            try await connection.query(
                PostgresQuery(
                    unsafeSQL:
                        "ALTER TABLE \(StoreSQL.quoted(table)) ALTER COLUMN \(StoreSQL.quoted(name)) TYPE double precision"
                ), logger: logger)
        }
        let updated = current.applying(plan)
        try await save(updated, on: connection, logger: logger)
        return (plan, updated)
    }

    static func addColumn(
        _ name: String, _ type: SQLColumnType, to table: String, on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.query(
            PostgresQuery(
                unsafeSQL: "ALTER TABLE \(StoreSQL.quoted(table)) ADD COLUMN \(StoreSQL.quoted(name)) \(sqlType(type))"),
            logger: logger)
    }

    /// User text keeps the database's collation, so that `toupper`/`tolower` map all of Unicode (the
    /// translator adds `COLLATE "C"` wherever text is compared or ordered, to compare by code point as
    /// SQLite and the clients do).
    static func sqlType(_ type: SQLColumnType) -> String {
        switch type {
        case .string, .json, .dynamic: "text"
        case .integer, .date: "bigint"
        case .double: "double precision"
        case .bool: "boolean"
        }
    }
}
