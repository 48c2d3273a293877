public import Foundation
import GRDB
public import Logging
public import SyncCore
import SyncSQL
import SyncSQLite

/// The embedded store: every table in one SQLite file, in WAL mode, read through a pool of
/// connections while writes take turns.
///
/// The §5 cursor guarantee holds because SQLite runs one write transaction at a time and each write
/// takes its `updatedAt` inside its transaction as `max(now, the table's greatest updatedAt + 1 ms)`:
/// stamps strictly increase in commit order, and an index on `(updatedAt, id)` makes cursor queries
/// cost O(changes), not O(table).
///
/// For example:
/// ```swift
/// let store = try SQLiteTableStore(path: "sync.sqlite")
/// try await store.prepare([.todoItem])
/// ```
public final class SQLiteTableStore: TableStore {
    let pool: DatabasePool
    let now: @Sendable () -> Date
    let logger: Logger
    /// How long one read may take before it is interrupted.
    let queryTimeout: Duration
    let schemas: SchemaCache
    /// The atomic set this store's work runs in: the set of the store ``atomically(_:)`` hands its body; nil for the
    /// store itself.
    private let joinedSet: SQLiteHeldTransaction?

    /// Opens (or creates) the database file and brings its bookkeeping up to date.
    ///
    /// - Parameters:
    ///   - path: The SQLite file.
    ///   - now: The clock that stamps `createdAt` and `updatedAt`.
    ///   - logger: Where the store logs the database's own words for a failure it answers 503 to. Default: nowhere.
    ///   - queryTimeout: How long one read (a query, a lookup) may take before SQLite is interrupted
    ///     and the request fails with ``TableStoreError/unavailable(_:)``. Default 10 s.
    /// - Throws: ``TableStoreError/unavailable(_:)`` when the file cannot be opened or migrated.
    public init(
        path: String, now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = .silent, queryTimeout: Duration = .seconds(10)
    ) throws {
        let migrator = Self.migrator
        do {
            pool = try openDatabasePool(path: path)
            if let newer = try pool.read({ db in try Self.unknownMigrations(db, migrator) }) {
                throw TableStoreError.unavailable(
                    "the database at \(path) was set up by a newer sync-server (bookkeeping steps \(newer) are unknown to this one); it was left as it is"
                )
            }
            try migrator.migrate(pool)
        } catch let error as TableStoreError {
            throw error
        } catch {
            throw TableStoreError.unavailable("cannot open the SQLite database at \(path): \(Self.reason(error))")
        }
        self.now = now
        self.logger = logger
        self.queryTimeout = queryTimeout
        schemas = SchemaCache()
        joinedSet = nil
    }

    /// The store as an atomic set sees it: `base`'s database and schemas, every call in `set`'s transaction.
    private init(joining set: SQLiteHeldTransaction, of base: SQLiteTableStore) {
        pool = base.pool
        now = base.now
        logger = base.logger
        queryTimeout = base.queryTimeout
        schemas = base.schemas
        joinedSet = set
    }

    static func reason(_ error: any Error) -> String {
        (error as? DatabaseError)?.message ?? "\(error)"
    }

    /// The store's own bookkeeping, versioned; never touches the user tables' rows.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: table registry") { db in
            try db.execute(
                sql: """
                    CREATE TABLE "__sync_tables" (
                        "name" TEXT PRIMARY KEY NOT NULL,
                        "displayName" TEXT NOT NULL,
                        "columns" TEXT NOT NULL
                    )
                    """)
        }
        migrator.registerMigration("v2: outbox") { db in
            // AUTOINCREMENT: a sequence is never used again after its entry is removed.
            try db.execute(sql: CommitOutbox.createSQL(sequence: "INTEGER PRIMARY KEY AUTOINCREMENT"))
        }
        migrator.registerMigration("v3: scope exits") { db in
            try db.execute(sql: ScopeExits.createSQL(stamp: "INTEGER"))
        }
        migrator.registerMigration("v4: integer ids") { db in
            try db.execute(sql: #"ALTER TABLE "__sync_tables" ADD COLUMN "lastID" INTEGER NOT NULL DEFAULT 0"#)
        }
        migrator.registerMigration("v5: tombstone horizons") { db in
            try db.execute(sql: #"ALTER TABLE "__sync_tables" ADD COLUMN "horizon" INTEGER"#)
        }
        migrator.registerMigration("v6: removed ids") { db in
            try db.execute(
                sql: #"""
                    CREATE TABLE "__sync_removed" ("table" TEXT NOT NULL, "id" TEXT NOT NULL, "stamp" INTEGER NOT NULL,
                        PRIMARY KEY ("table", "id")) WITHOUT ROWID;
                    CREATE INDEX "__sync_removed_stamp" ON "__sync_removed" ("table", "stamp");
                    ALTER TABLE "__sync_tables" ADD COLUMN "forgotten" INTEGER;
                    """#)
        }
        return migrator
    }

    public func prepare(_ tables: [TableConfiguration]) async throws {
        for configuration in tables {
            let schema = try await write { db in try Self.prepare(configuration, in: db) }
            publish(schema)
        }
    }

    /// The bookkeeping steps applied to the database that this server does not know (a newer release's), or nil.
    static func unknownMigrations(_ db: Database, _ migrator: DatabaseMigrator) throws -> String? {
        guard try migrator.hasBeenSuperseded(db) else { return nil }
        let known = Set(migrator.migrations)
        return try migrator.appliedIdentifiers(db).subtracting(known).sorted().joined(separator: ", ")
    }

    public func checkReady() async throws {
        let migrator = Self.migrator
        let (complete, newer) = try await read { db in
            (try migrator.hasCompletedMigrations(db), try Self.unknownMigrations(db, migrator))
        }
        if let newer {
            throw TableStoreError.unavailable("the database has bookkeeping steps this server does not know: \(newer)")
        }
        guard complete else {
            throw TableStoreError.unavailable("the database's bookkeeping is older than this server's")
        }
    }

    public func schema(of table: TableName) async throws -> TableSchema? {
        schemas.schema(of: table)
    }

    public func nextIntegerID(in table: TableName) async throws -> Int64 {
        let schema = try schemas.require(table)
        return try await write { db in
            // Above the largest integer id stored too: seeded rows, and rows written before the counter.
            let largest =
                try String.fetchOne(
                    db, sql: "SELECT max(\"id\") FROM \(StoreSQL.quoted(schema.name.canonical))"
                ).flatMap(IntegerIDs.number) ?? 0
            guard largest < Int64.max,
                let next = try Int64.fetchOne(
                    db,
                    sql:
                        #"UPDATE "__sync_tables" SET "lastID" = max("lastID", ?) + 1 WHERE "name" = ? RETURNING "lastID""#,
                    arguments: [largest, schema.name.canonical]),
                next > 0
            else { throw TableStoreError.invalidItem("\(schema.name) has no integer id left") }
            return next
        }
    }

    public var offersAtomicSets: Bool { true }

    public func atomically<T: Sendable>(_ body: @escaping @Sendable (any TableStore) async throws -> T) async throws
        -> T
    {
        if joinedSet != nil { return try await body(self) }
        let held: SQLiteHeldTransaction
        do {
            held = try await SQLiteHeldTransaction.begin(pool, limit: atomicSetLimit(queryTimeout: queryTimeout))
        } catch let error as DatabaseError {
            throw unavailable(error)
        }
        let value: T
        do {
            value = try await body(SQLiteTableStore(joining: held, of: self))
        } catch {
            await held.rollback()
            throw error
        }
        do {
            try await held.commit()
        } catch let error as DatabaseError {
            throw unavailable(error)
        }
        for schema in held.publications.withLock({ $0 }) { schemas.publish(schema) }
        return value
    }

    /// Merges a schema this store's work committed into the cache; in an atomic set, holds it back until the set
    /// commits (a column a member of the set adds is not there when the set is undone).
    func publish(_ schema: TableSchema) {
        guard let joinedSet else { return schemas.publish(schema) }
        joinedSet.publications.withLock { $0.append(schema) }
    }

    /// Runs a write transaction, mapping database failures to ``TableStoreError``. Inside an atomic set
    /// (``atomically(_:)``) it is a savepoint of the set's transaction.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            if let held = joinedSet { return try await held.run(body) }
            return try await pool.write(body)
        } catch let error as TableStoreError {
            throw error
        } catch let error as DatabaseError {
            throw unavailable(error)
        }
    }

    /// Runs a read, mapping database failures to ``TableStoreError``. A read still running after
    /// ``queryTimeout`` is interrupted (SQLite stops the statement) and fails with
    /// ``TableStoreError/unavailable(_:)``; cancelling the caller interrupts it too. Inside an atomic set it reads
    /// the set's transaction, which sees the set's writes.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            if let held = joinedSet { return try await held.run(body) }
            // Cancelling the read makes GRDB interrupt its statement; the caller does not wait for that.
            return try await abandoning(
                after: queryTimeout, throwing: { TableStoreError.unavailable(queryTimeoutMessage) }
            ) { try await self.pool.read(body) }
        } catch let error as TableStoreError {
            throw error
        } catch let error as DatabaseError where error.message == integerOverflowMessage {
            throw TableStoreError.invalidQuery(integerOverflowMessage)
        } catch let error as DatabaseError where Self.isTooDeep(error) {
            throw TableStoreError.invalidQuery(tooDeepMessage)
        } catch let error as DatabaseError {
            throw unavailable(error)
        }
    }

    /// Whether SQLite refused a statement for its nesting (its parser's stack, or its expression depth).
    static func isTooDeep(_ error: DatabaseError) -> Bool {
        error.resultCode == .SQLITE_ERROR
            && (error.message == "parser stack overflow"
                || error.message?.hasPrefix("Expression tree is too large") == true)
    }

    /// A database failure as a 503 in our words; SQLite's own text goes to the log, not to clients.
    func unavailable(_ error: DatabaseError) -> TableStoreError {
        let reason = Self.unavailableReason(error.resultCode)
        logger.warning("\(reason) (SQLite: \(Self.reason(error)))")
        return .unavailable(reason)
    }

    static func unavailableReason(_ code: ResultCode) -> String {
        switch code {
        case .SQLITE_BUSY, .SQLITE_LOCKED: "the database is busy; try again"
        case .SQLITE_FULL: "the database's disk is full"
        case .SQLITE_NOMEM: "the server is out of memory"
        case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PERM:
            "the database file cannot be read or written"
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: "the database file is damaged"
        default: "the database failed the request"
        }
    }
}
