import Foundation
import GRDB
import OfflineSync
import OfflineSyncTesting
import SyncCore
import Testing

/// Importing the Azure Mobile Apps iOS SDK's Core Data store (issue 34), without a server: what is carried (rows with
/// their types, the queue in order, parked errors, positions), that a second import changes nothing, and that a file
/// that is not such a store, a damaged one or a model the import does not understand is refused with the new store
/// untouched and the old file unwritten.
@Suite(.timeLimit(.minutes(3))) struct AzureImportTests {
    static let tables = [
        AzureMobileAppsImport.Table("TodoItem", fields: ["text": .string, "complete": .boolean]),
        AzureMobileAppsImport.Table("Category", fields: ["name": .string, "sortOrder": .integer]),
    ]
    static let created = Date(timeIntervalSince1970: 1_700_000_000.123)
    static let position = WireDate(parsing: "2026-01-02T03:04:05.678Z")!

    /// The tutorial's model, in SDK 3's names (or SDK 2's `ms_` ones): a synced row, one added offline, one edited
    /// offline with a 412 parked on it, one deleted offline; a table without changes; positions for two query ids.
    static func tutorial(prefix: String = "", uuid: String = "STORE-1") throws -> AzureCoreDataFixture {
        var old = AzureCoreDataFixture(
            entities: [
                .init("TodoItem", ["text": .string, "complete": .boolean], prefix: prefix),
                .init("Category", ["name": .string, "sortOrder": .integer], prefix: prefix),
            ], uuid: uuid)
        func synced(_ id: String, _ text: String, _ complete: Bool) -> [String: AzureCoreDataFixture.Value] {
            [
                "id": .string(id), "text": .string(text), "complete": .bool(complete),
                prefix + "version": .string("v-\(id)"), prefix + "createdAt": .date(created),
                prefix + "updatedAt": .date(created), prefix + "deleted": .bool(false),
            ]
        }
        try old.addRow("TodoItem", synced("a1", "Synced", true))
        try old.addRow("TodoItem", ["id": .string("a2"), "text": .string("Added offline"), "complete": .bool(false)])
        try old.addRow("TodoItem", synced("a3", "Edited offline", false))
        try old.addRow("Category", ["id": .string("c1"), "name": .string("Home"), "sortOrder": .int(2)])
        old.addOperation(table: "TodoItem", itemID: "a2", type: .insert)
        let edit = old.addOperation(table: "TodoItem", itemID: "a3", type: .update)
        old.addOperation(
            table: "TodoItem", itemID: "a4", type: .delete, item: ["id": "a4", "text": "Gone", "version": "v-a4"])
        old.addError(
            operationID: edit, statusCode: 412, description: "The version does not match",
            item: ["id": "a3", "text": "Edited offline"], serverItem: ["id": "a3", "text": "Theirs", "version": "v9"])
        old.addDeltaToken(table: "TodoItem", queryID: "allTodoItems", updatedAt: position)
        old.addDeltaToken(table: "Category", queryID: "categories", updatedAt: position)
        return old
    }

    static func write(_ fixture: AzureCoreDataFixture, in workspace: Workspace, as name: String = "old.sqlite") throws
        -> URL
    {
        let url = workspace.url.appendingPathComponent(name)
        try fixture.write(to: url)
        return url
    }

    @Test(arguments: ["", "ms_"]) func theTutorialsStoreIsCarriedWhole(prefix: String) async throws {
        let workspace = try Workspace()
        let old = try Self.write(try Self.tutorial(prefix: prefix), in: workspace)
        let store = try SQLiteLocalStore(path: workspace.path("new.sqlite"))
        let summary = try await store.importAzureMobileAppsStore(at: old, tables: Self.tables)
        #expect(summary.rows == ["TodoItem": 3, "Category": 1])
        #expect(summary.operations == [.insert: 1, .update: 1, .delete: 1] && summary.operationCount == 3)
        #expect(summary.errors == 1 && summary.errorsLeftOut == 0 && !summary.alreadyImported)
        #expect(Set(summary.positions.map(\.queryID)) == ["allTodoItems", "categories"])

        let transport = ScriptedTransport()
        let client = SyncClient(
            url: URL(string: "http://127.0.0.1:9")!, store: store,
            configuration: {
                var c = SyncClient.Configuration(); c.transport = transport; return c
            }())
        let operations = try await client.pendingOperations()
        #expect(operations.map(\.kind) == [.insert, .update, .delete], "the SDK's order")
        #expect(operations.map(\.itemID.rawValue) == ["a2", "a3", "a4"])
        #expect(operations[2].item?["version"] == "v-a4", "a delete keeps the item the SDK kept, for If-Match")
        let errors = try await client.operationErrors()
        #expect(errors.count == 1 && errors.first?.status == 412 && errors.first?.isConflict == true)
        #expect(errors.first?.operation.itemID.rawValue == "a3" && errors.first?.serverItem?["version"] == "v9")

        let todos = try client.syncTable("TodoItem")
        let synced = try #require(try await todos.item(id: ItemID("a1")))
        #expect(synced["complete"] == true && synced["text"] == "Synced" && synced["version"] == "v-a1")
        #expect(synced["createdAt"] == "2023-11-14T22:13:20.123Z", "seconds since 2001 become the wire's dates")
        let offline = try #require(try await todos.item(id: ItemID("a2")))
        #expect(offline == ["id": "a2", "text": "Added offline", "complete": false], "no system field never synced")
        #expect(try await client.syncTable("Category").item(id: ItemID("c1"))?["sortOrder"] == 2)

        // A table without pending operations pulls at once, from the imported position on (`ge`: the SDK's delta
        // token was the greatest updatedAt applied, and rows at that instant may not all have been read).
        transport.append([.status(200, json: [])])
        try await client.syncTable("Category").pull(queryID: "categories")
        let asked = try #require(transport.requests.first?.url.absoluteString.removingPercentEncoding)
        #expect(asked.contains("updatedAt ge datetimeoffset'2026-01-02T03:04:05.678Z'"), "\(asked)")
    }

    /// The import's copy of the old store lives beside the new store, in `<store>-import/`, never in the temporary
    /// directory (issue 63): a copy a killed import left there — a person's data outside the store's folder — was never
    /// removed. Now a leftover copy is removed by the next open of the store, the next import and a sign-out, unless an
    /// import is reading it (its shared lock on `<store>-import.lock`); a finished import leaves none.
    @Test func aCopyAKilledImportLeftIsRemovedByTheNextOpenImportOrSignOut() async throws {
        let workspace = try Workspace()
        let old = try Self.write(try Self.tutorial(), in: workspace)
        let database = workspace.path("new.sqlite")
        let copies = database + "-import"
        /// What a killed import leaves: its folder with the copy of the old file.
        func leaveCopy() throws {
            let folder = copies + "/" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: old.path, toPath: folder + "/store.sqlite")
        }
        try leaveCopy()
        // While an import reads (holding the lock shared), an open leaves the copies alone.
        let reader = open(database + "-import.lock", O_RDWR | O_CREAT, 0o600)
        #expect(flock(reader, LOCK_SH) == 0)
        _ = try SQLiteLocalStore(path: database)
        #expect(FileManager.default.fileExists(atPath: copies))
        close(reader)
        _ = try SQLiteLocalStore(path: database)
        #expect(!FileManager.default.fileExists(atPath: copies), "the next open removes a killed import's copy")

        let store = try SQLiteLocalStore(path: database)
        try leaveCopy()
        let summary = try await store.importAzureMobileAppsStore(at: old, tables: Self.tables)
        #expect(summary.operationCount == 3)
        #expect(!FileManager.default.fileExists(atPath: copies), "an import removes its own copy and older ones")

        try leaveCopy()
        let client = SyncClient(url: URL(string: "http://127.0.0.1:9")!, store: store)
        try await client.signOut(pending: .discard)
        #expect(!FileManager.default.fileExists(atPath: copies), "a sign-out removes a killed import's copy")
    }

    /// Core Data keeps its store in WAL mode: what the app's last writes left in `-wal` (not yet checkpointed into the
    /// file) is carried too — the import reads a copy of both.
    @Test func whatOnlyTheWriteAheadLogHoldsIsImported() async throws {
        let workspace = try Workspace()
        let url = try Self.write(try Self.tutorial(), in: workspace)
        let device = workspace.url.appendingPathComponent("device.sqlite")
        try Self.copyWhileTheLogHoldsALastOperation(url, to: device)
        let store = try SQLiteLocalStore(path: workspace.path("new.sqlite"))
        let summary = try await store.importAzureMobileAppsStore(at: device, tables: Self.tables)
        #expect(summary.operationCount == 4)
        let client = SyncClient(url: URL(string: "http://127.0.0.1:9")!, store: store)
        #expect(try await client.pendingOperations().last?.itemID.rawValue == "c1")
    }

    /// Appends an update of `c1` to the queue of the store at `url` and copies the file and its `-wal` to `copy` before
    /// the log is checkpointed, as a device's files are when the app was stopped.
    static func copyWhileTheLogHoldsALastOperation(_ url: URL, to copy: URL) throws {
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO ZMS_TABLEOPERATIONS (Z_ENT, Z_OPT, ZID, ZITEMID, ZPROPERTIES, ZTABLE, ZTABLEKIND)
                    VALUES (1, 1, 99, 'c1', ?, 'Category', 0)
                    """, arguments: [Data(#"{"type":1}"#.utf8)])
        }
        let logged = (try FileManager.default.attributesOfItem(atPath: url.path + "-wal")[.size] as? Int) ?? 0
        guard logged > 0 else { throw ValueError(kind: "fixture", reason: "the write was checkpointed at once") }
        try FileManager.default.copyItem(at: url, to: copy)
        try FileManager.default.copyItem(atPath: url.path + "-wal", toPath: copy.path + "-wal")
        try queue.close()
    }

    @Test func importingTheSameFileAgainChangesNothingAndAnotherStoreIsRefused() async throws {
        let workspace = try Workspace()
        let old = try Self.write(try Self.tutorial(), in: workspace)
        let store = try SQLiteLocalStore(path: workspace.path("new.sqlite"))
        let first = try await store.importAzureMobileAppsStore(at: old, tables: Self.tables)
        var again = try await store.importAzureMobileAppsStore(at: old, tables: Self.tables)
        #expect(again.alreadyImported)
        again.alreadyImported = false
        #expect(again == first)
        let client = SyncClient(url: URL(string: "http://127.0.0.1:9")!, store: store)
        #expect(try await client.pendingOperations().count == 3, "nothing doubled")

        let other = try Self.write(try Self.tutorial(uuid: "STORE-2"), in: workspace, as: "other.sqlite")
        let refused = await Self.refusal {
            _ = try await store.importAzureMobileAppsStore(at: other, tables: Self.tables)
        }
        #expect(refused?.code == .otherStoreImported)

        let used = try SQLiteLocalStore(path: workspace.path("used.sqlite"))
        let todos = try SyncClient(url: URL(string: "http://127.0.0.1:9")!, store: used).syncTable("TodoItem")
        try await todos.insert(["id": "z1", "text": "Written here first"])
        let refusal = await Self.refusal { _ = try await used.importAzureMobileAppsStore(at: old, tables: Self.tables) }
        #expect(refusal?.code == .storeNotEmpty && refusal?.message.contains("pending operations") == true)
    }

    /// Runs `sql` on a new SQLite file.
    static func execute(at url: URL, _ sql: String) throws {
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { try $0.execute(sql: sql) }
        try queue.close()
    }

    static func refusal(_ body: () async throws -> Void) async -> AzureMobileAppsImport.ImportError? {
        do {
            try await body()
            return nil
        } catch let error as AzureMobileAppsImport.ImportError {
            return error
        } catch {
            Issue.record("not an import error: \(error)")
            return nil
        }
    }

    /// A damaged or foreign file, or a model the import does not understand: refused with a clear message, the new
    /// store untouched, the old file's bytes unchanged.
    @Test func aForeignDamagedOrMisunderstoodFileIsRefusedAndNothingIsWritten() async throws {
        let workspace = try Workspace()
        let good = try Self.write(try Self.tutorial(), in: workspace)
        var cases: [(String, URL, [AzureMobileAppsImport.Table], AzureMobileAppsImport.ImportError.Code, String)] = []

        let text = workspace.url.appendingPathComponent("notes.txt")
        try Data(String(repeating: "not a database\n", count: 100).utf8).write(to: text)
        cases.append(("a text file", text, Self.tables, .notAStore, "not an SQLite file"))

        let plain = workspace.url.appendingPathComponent("plain.sqlite")
        try Self.execute(at: plain, "CREATE TABLE notes (body TEXT)")
        cases.append(("an SQLite file of another app", plain, Self.tables, .notAStore, "not a Core Data store"))

        let other = workspace.url.appendingPathComponent("coredata.sqlite")
        try Self.execute(
            at: other,
            """
            CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
            CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
            CREATE TABLE ZNOTE (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZBODY VARCHAR);
            INSERT INTO Z_PRIMARYKEY VALUES (1, 'Note', 0, 0);
            """)
        cases.append(("Core Data without the SDK", other, Self.tables, .notAStore, "without the Azure Mobile Apps"))

        let bytes = try Data(contentsOf: good)
        let cut = workspace.url.appendingPathComponent("cut.sqlite")
        try bytes.prefix(bytes.count / 2).write(to: cut)
        cases.append(("a file cut in half", cut, Self.tables, .damaged, "cut.sqlite"))

        var scribbled = bytes
        scribbled.replaceSubrange(4096..<min(12_288, bytes.count), with: Data(repeating: 0x5A, count: 8192))
        let garbled = workspace.url.appendingPathComponent("garbled.sqlite")
        try scribbled.write(to: garbled)
        cases.append(("pages overwritten", garbled, Self.tables, .damaged, "garbled.sqlite"))

        let extra = AzureCoreDataFixture(
            entities: [
                .init("TodoItem", ["text": .string, "complete": .boolean, "priority": .integer]),
                .init("Category", ["name": .string, "sortOrder": .integer]),
            ])
        let unnamedColumn = try Self.write(extra, in: workspace, as: "extra.sqlite")
        cases.append(("a column not named", unnamedColumn, Self.tables, .unsupportedModel, "ZPRIORITY"))
        cases.append(("a table with operations not named", good, [Self.tables[1]], .unsupportedModel, "'TodoItem'"))
        let wrongType = [AzureMobileAppsImport.Table("TodoItem", fields: ["text": .integer, "complete": .boolean])]
        cases.append(
            ("a field of another type", good, wrongType + [Self.tables[1]], .unsupportedModel, "TodoItem.text"))
        let missing = [AzureMobileAppsImport.Table("TodoItem", fields: ["title": .string, "complete": .boolean])]
        cases.append(
            ("an attribute missing", good, missing + [Self.tables[1]], .unsupportedModel, "no attribute title"))

        for (label, url, tables, code, words) in cases {
            let before = try Data(contentsOf: url)
            let store = try SQLiteLocalStore(path: workspace.path("new-\(UUID().uuidString).sqlite"))
            let refusal = await Self.refusal { _ = try await store.importAzureMobileAppsStore(at: url, tables: tables) }
            #expect(refusal?.code == code, "\(label): \(String(describing: refusal))")
            #expect(refusal?.message.contains(words) == true, "\(label): \(refusal?.message ?? "no refusal")")
            print("\(label): \(refusal?.message ?? "-")")
            let client = SyncClient(url: URL(string: "http://127.0.0.1:9")!, store: store)
            #expect(try await client.pendingOperations().isEmpty, "\(label): the new store is untouched")
            #expect(try await client.syncTable("TodoItem").items().isEmpty, "\(label)")
            #expect(try Data(contentsOf: url) == before, "\(label): the old file is never written")
        }
        #expect(!FileManager.default.fileExists(atPath: good.path + "-journal"))
    }
}
