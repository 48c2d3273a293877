import Foundation
import GRDB
import OfflineSync
import Testing

/// A store written by the first release (schema v1) opens with every pending operation kept.
@Suite(.timeLimit(.minutes(3))) struct StoreMigrationTests {
    @Test func aVersion1StoreKeepsItsOperationsAndDropsTransientErrors() async throws {
        let workspace = try Workspace()
        let path = workspace.path("v1.sqlite")
        let v1 = try DatabaseQueue(path: path)
        try await v1.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE "grdb_migrations" ("identifier" TEXT NOT NULL PRIMARY KEY);
                    INSERT INTO "grdb_migrations" VALUES ('v1: queue, errors, cursors, settings');
                    CREATE TABLE "sync_operations" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "tableName" TEXT NOT NULL,
                        "itemID" TEXT NOT NULL, "kind" TEXT NOT NULL, "item" TEXT, "isInFlight" INTEGER NOT NULL DEFAULT 0);
                    CREATE INDEX "sync_operations_item" ON "sync_operations" ("tableName", "itemID");
                    CREATE TABLE "sync_errors" ("operationID" INTEGER PRIMARY KEY NOT NULL, "operation" TEXT NOT NULL,
                        "status" INTEGER NOT NULL, "message" TEXT, "sentItem" TEXT, "serverItem" TEXT);
                    CREATE TABLE "sync_cursors" ("tableName" TEXT NOT NULL, "queryID" TEXT NOT NULL,
                        "updatedAt" INTEGER NOT NULL, "itemID" TEXT NOT NULL, PRIMARY KEY ("tableName", "queryID"));
                    CREATE TABLE "sync_settings" ("key" TEXT PRIMARY KEY NOT NULL, "value" TEXT NOT NULL);
                    CREATE TABLE "rows_todoitem" ("id" TEXT PRIMARY KEY NOT NULL, "updatedAt" TEXT, "data" TEXT NOT NULL);
                    INSERT INTO "rows_todoitem" VALUES ('a', NULL, '{"id":"a","text":"a","complete":false}');
                    INSERT INTO "rows_todoitem" VALUES ('b', NULL, '{"id":"b","text":"b","complete":false,"version":"v1"}');
                    INSERT INTO "sync_operations" ("tableName", "itemID", "kind", "isInFlight") VALUES ('todoitem', 'a', 'insert', 1);
                    INSERT INTO "sync_operations" ("tableName", "itemID", "kind") VALUES ('todoitem', 'b', 'update');
                    INSERT INTO "sync_errors" VALUES (1, '{"id":1,"table":"todoitem","itemID":"a","kind":"insert","item":null}', 503, 'busy', NULL, NULL);
                    INSERT INTO "sync_errors" VALUES (2, '{"id":2,"table":"todoitem","itemID":"b","kind":"update","item":null}', 412, NULL, NULL, '{"id":"b","text":"theirs","version":"v2"}');
                    """)
        }
        try v1.close()
        let client = try await SyncClient.make(
            URL(string: "http://127.0.0.1:9")!, workspace: workspace, store: "v1.sqlite")
        let operations = try await client.pendingOperations()
        #expect(operations.map(\.kind) == [.insert, .update])
        #expect(operations.map(\.isAttempted) == [false, false])
        #expect(try await client.operationErrors().map(\.status) == [412])  // the 503 was never the operation's fault
        #expect(try await client.syncTable("TodoItem", of: TodoItem.self).count() == 2)
    }
}
