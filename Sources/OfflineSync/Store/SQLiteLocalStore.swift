import Foundation
import GRDB
import SyncCore
import SyncSQLite

/// The default local store: one SQLite file (WAL mode) holding each sync table's rows as JSON, the
/// operation queue, operation errors, pull cursors and settings.
///
/// Rows keep the item exactly as JSON (integers stay integers) and local queries read fields with
/// `json_extract`, so any item shape is queryable without a declared schema. The store's own tables
/// are created by versioned migrations that never drop pending operations.
///
/// For example:
/// ```swift
/// let store = try SQLiteLocalStore(path: "todo.sqlite")
/// let client = try await SyncClient(url: serverURL, store: store)
/// ```
public final class SQLiteLocalStore: LocalStore {
    let pool: DatabasePool
    /// Tables whose row table is known to exist.
    let knownTables = Locked<Set<String>>([])

    /// Opens (or creates) the store file and migrates it.
    ///
    /// - Parameter path: The SQLite file; its folder must exist.
    /// - Throws: ``LocalStoreError`` when the file cannot be opened or migrated.
    public init(path: String) throws {
        do {
            pool = try openDatabasePool(path: path)
            try Self.migrator.migrate(pool)
        } catch {
            throw LocalStoreError(operation: "open \(path)", underlying: error)
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: queue, errors, cursors, settings") { db in
            try db.execute(
                sql: """
                    CREATE TABLE "sync_operations" (
                        "id" INTEGER PRIMARY KEY AUTOINCREMENT,
                        "tableName" TEXT NOT NULL,
                        "itemID" TEXT NOT NULL,
                        "kind" TEXT NOT NULL,
                        "item" TEXT,
                        "isInFlight" INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX "sync_operations_item" ON "sync_operations" ("tableName", "itemID");
                    CREATE TABLE "sync_errors" (
                        "operationID" INTEGER PRIMARY KEY NOT NULL,
                        "operation" TEXT NOT NULL,
                        "status" INTEGER NOT NULL,
                        "message" TEXT,
                        "sentItem" TEXT,
                        "serverItem" TEXT
                    );
                    CREATE TABLE "sync_cursors" (
                        "tableName" TEXT NOT NULL,
                        "queryID" TEXT NOT NULL,
                        "updatedAt" INTEGER NOT NULL,
                        "itemID" TEXT NOT NULL,
                        PRIMARY KEY ("tableName", "queryID")
                    );
                    CREATE TABLE "sync_settings" ("key" TEXT PRIMARY KEY NOT NULL, "value" TEXT NOT NULL);
                    """)
        }
        return migrator
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalStoreWriter) throws -> T) async throws -> T {
        do {
            return try await pool.write { db in try body(SQLiteLocalStoreAccess(db: db, store: self)) }
        } catch let error as DatabaseError {
            throw LocalStoreError(operation: "write", underlying: error)
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalStoreReader) throws -> T) async throws -> T {
        do {
            return try await pool.read { db in try body(SQLiteLocalStoreAccess(db: db, store: self)) }
        } catch let error as DatabaseError {
            throw LocalStoreError(operation: "read", underlying: error)
        }
    }

    /// The row table of a sync table.
    static func rowTable(_ table: TableName) -> String {
        "\"rows_\(table.canonical)\""
    }
}

/// The local store failed: the file could not be opened, read or written.
public struct LocalStoreError: Error, Sendable, CustomStringConvertible {
    /// What the store was doing.
    public var operation: String
    /// The database's error.
    public var underlying: any Error

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - operation: What the store was doing.
    ///   - underlying: The database's error.
    public init(operation: String, underlying: any Error) {
        self.operation = operation
        self.underlying = underlying
    }

    /// One line naming the operation and the database's message (no item contents).
    public var description: String {
        let reason = (underlying as? DatabaseError)?.message ?? String(describing: type(of: underlying))
        return "Local store could not \(operation): \(reason)"
    }
}
