import GRDB

/// The store's schema, as versioned migrations: each adds to the last and none drops a pending operation.
extension SQLiteLocalStore {
    /// The migrations, oldest first: ``SQLiteLocalStore`` runs those a file has not had when it opens it.
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
        // Attempts are frozen and kept across restarts (instead of an in-flight flag cleared at start);
        // transient failures are no longer operation errors; items to fetch again after a resolution.
        migrator.registerMigration("v2: frozen attempts, re-creation, refetch") { db in
            try db.execute(
                sql: """
                    ALTER TABLE "sync_operations" ADD COLUMN "attempt" TEXT;
                    ALTER TABLE "sync_operations" ADD COLUMN "recreatesItem" INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE "sync_operations" DROP COLUMN "isInFlight";
                    DELETE FROM "sync_errors" WHERE "status" IN (408, 429) OR "status" >= 500;
                    CREATE TABLE "sync_refetch" (
                        "tableName" TEXT NOT NULL,
                        "itemID" TEXT NOT NULL,
                        PRIMARY KEY ("tableName", "itemID")
                    );
                    """)
        }
        // Files attached to rows (issue 33): each once, by its SHA-256; and the fields that name them.
        migrator.registerMigration("v3: attachments") { db in
            try db.execute(
                sql: """
                    CREATE TABLE "sync_attachments" (
                        "hash" TEXT PRIMARY KEY NOT NULL,
                        "tableName" TEXT NOT NULL,
                        "size" INTEGER NOT NULL,
                        "pending" INTEGER NOT NULL,
                        "cached" INTEGER NOT NULL,
                        "sequence" INTEGER NOT NULL,
                        "lastUsed" REAL NOT NULL,
                        "failure" TEXT
                    );
                    CREATE TABLE "sync_attachment_fields" (
                        "tableName" TEXT NOT NULL,
                        "field" TEXT NOT NULL,
                        PRIMARY KEY ("tableName", "field")
                    );
                    """)
        }
        // The base row of each pending update (issue 47): the three-way merge of a conflict, and a v2 update that
        // sends only what changed.
        migrator.registerMigration("v4: base rows of updates") { db in
            try db.execute(sql: #"ALTER TABLE "sync_operations" ADD COLUMN "base" TEXT"#)
        }
        // The change set of each operation made in one (issue 49): pushed together, never collapsed across.
        migrator.registerMigration("v5: change sets") { db in
            try db.execute(sql: #"ALTER TABLE "sync_operations" ADD COLUMN "changeSet" INTEGER"#)
        }
        // The files that rows a pull stored name, until they are downloaded ahead (AttachmentPolicy.afterPull): the
        // prefetch reads these, not every row of the table.
        migrator.registerMigration("v6: files to fetch ahead") { db in
            try db.execute(
                sql: #"""
                    CREATE TABLE "sync_prefetch" (
                        "sequence" INTEGER PRIMARY KEY, "tableName" TEXT NOT NULL, "hash" TEXT NOT NULL,
                        UNIQUE ("tableName", "hash"))
                    """#)
        }
        return migrator
    }
}
