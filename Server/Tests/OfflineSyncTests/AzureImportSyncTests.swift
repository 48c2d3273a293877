import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import SyncServer
import Testing

/// The move from the Azure Mobile Apps iOS SDK on a device that was offline when the update installed (issue 34),
/// against a real server in v2: a Core Data store with 1,000 pending operations across three tables — inserts,
/// updates, deletes, an update whose item was deleted after it (the SDK appends the delete when the update is being
/// pushed), one parked 412, an insert the server already holds (the old app was killed before it read the reply) — and
/// positions for two query ids is imported; then every operation goes exactly once, in
/// the SDK's order, the parked one once resolved; the first pull of each imported query id reads only rows updated at
/// or after its position; and the tutorial goes on, with nothing lost, as another device sees.
@Suite(.serialized, .timeLimit(.minutes(3))) struct AzureImportSyncTests {
    static let fields: [String: [String: AzureMobileAppsImport.FieldType]] = [
        "TodoItem": ["text": .string, "complete": .boolean],
        "Category": ["name": .string, "sortOrder": .integer],
        "Note": ["body": .string, "pinned": .boolean],
    ]
    static let tables = ["TodoItem", "Category", "Note"]

    /// The SQL-side value of a field of a synced row, for the fixture.
    static func value(_ json: JSONValue?, _ type: AzureMobileAppsImport.FieldType) -> AzureCoreDataFixture.Value {
        switch (type, json) {
        case (.string, .string(let text)?): .string(text)
        case (.boolean, .bool(let flag)?): .bool(flag)
        case (.integer, .int(let number)?): .int(number)
        case (.date, .string(let text)?):
            .date(Date(timeIntervalSince1970: Double(WireDate(parsing: text)!.millisecondsSince1970) / 1000))
        default: .null
        }
    }

    /// A synced row as the old SDK kept it in Core Data.
    static func row(_ item: JSONValue, _ table: String) -> [String: AzureCoreDataFixture.Value] {
        var row: [String: AzureCoreDataFixture.Value] = [
            "id": value(item["id"], .string), "version": value(item["version"], .string),
            "createdAt": value(item["createdAt"], .date), "updatedAt": value(item["updatedAt"], .date),
            "deleted": .bool(false),
        ]
        for (field, type) in fields[table]! { row[field] = value(item[field], type) }
        return row
    }

    /// Every row of `table` on the server, deleted ones too, updated at or after `since`, read page by page.
    static func serverRows(_ url: URL, _ table: String, since: WireDate? = nil) async throws -> [JSONValue] {
        var rows: [JSONValue] = []
        while true {
            var components = URLComponents(
                url: url.appendingPathComponent("tables/\(table)"), resolvingAgainstBaseURL: false)!
            components.queryItems = [
                .init(name: "__includeDeleted", value: "true"), .init(name: "$skip", value: "\(rows.count)"),
                .init(name: "$top", value: "50"), .init(name: "$orderby", value: "id"),
            ]
            if let since {
                components.queryItems?.append(
                    .init(name: "$filter", value: "updatedAt ge datetimeoffset'\(since)'"))
            }
            let reply = try await URLSessionTransport().send(
                HTTPRequestData(method: "GET", url: components.url!, headers: ["ZUMO-API-VERSION": "2.0.0"]))
            let page = try #require(try JSONValue(parsing: reply.body).arrayValue, "\(reply.status)")
            if page.isEmpty { return rows }
            rows += page
        }
    }

    @Test func aThousandPendingOperationsArePushedOnceInOrderAndTheFirstPullsAreIncremental() async throws {
        let workspace = try Workspace()
        let served = try Self.tables.map { try TableConfiguration(name: $0) }
        try await LiveServer.run(in: workspace, tables: served) { url in
            // 1. What the old device had synced: 320 rows per table, on the server.
            let seeder = try await SyncClient.make(url, workspace: workspace, store: "seeder.sqlite") {
                $0.protocol = .v2
                // Its pushes go in batches of hundreds: in the whole suite one took longer than the default timeout
                // (as BatchPushTests met), and the push stopped after 1 operation.
                $0.requestTimeout = .seconds(300)
            }
            // In two rounds: the first 60 rows of each table are older than the positions below.
            for round in [0..<60, 60..<320] {
                for table in Self.tables {
                    let rows = try seeder.syncTable(table)
                    for index in round {
                        var item: JSONValue =
                            switch table {
                            case "TodoItem": ["text": .string("todo \(index)"), "complete": .bool(index % 3 == 0)]
                            case "Category": ["name": .string("category \(index)"), "sortOrder": .int(Int64(index))]
                            default: ["body": .string("note \(index)"), "pinned": .bool(index % 5 == 0)]
                            }
                        item["id"] = .string("\(table.lowercased())-\(index)")
                        try await rows.insert(item)
                    }
                }
                try await seeder.push()
            }
            var synced: [String: [JSONValue]] = [:]
            for table in Self.tables {
                synced[table] = try await seeder.syncTable(table).items().sorted {
                    ($0["updatedAt"]?.stringValue ?? "", $0["id"]?.stringValue ?? "")
                        < ($1["updatedAt"]?.stringValue ?? "", $1["id"]?.stringValue ?? "")
                }
            }

            // 2. What it did offline: 400 inserts, 349 updates, 249 deletes, an update and a delete of one item.
            var old = AzureCoreDataFixture(
                entities: Self.tables.map { table in
                    .init(
                        table,
                        Self.fields[table]!.mapValues {
                            $0 == .boolean ? .boolean : $0 == .integer ? .integer : .string
                        })
                })
            let plan: [String: (inserts: Int, updates: Int, deletes: Int)] = [
                "TodoItem": (200, 150, 100), "Category": (100, 100, 75), "Note": (100, 99, 74),
            ]
            var changes: [(table: String, id: String, type: AzureCoreDataFixture.OperationType, item: JSONValue?)] = []
            var expected: [String: [String: JSONValue]] = [:]  // the final rows, by table and id
            for table in Self.tables {
                let (inserts, updates, deletes) = plan[table]!
                let rows = synced[table]!
                for (position, item) in rows.enumerated() {
                    let index = position - 60  // the rows of the first round stay as they were
                    let id = item["id"]!.stringValue!
                    var row = Self.row(item, table)
                    var final = item
                    if index < 0 {
                        // unchanged
                    } else if index < updates {
                        let field = Self.fields[table]!.first { $0.value == .string }!.key
                        row[field] = .string("edited offline \(id)")
                        final[field] = .string("edited offline \(id)")
                        changes.append((table, id, .update, nil))
                    } else if index < updates + deletes {
                        changes.append((table, id, .delete, ["id": .string(id), "version": item["version"]!]))
                        continue
                    }
                    if table == "TodoItem" && index == updates + deletes { continue }  // the item "x" below
                    try old.addRow(table, row)
                    expected[table, default: [:]][id] = final
                }
                for index in 0..<inserts {
                    let id = "\(table.lowercased())-new-\(index)"
                    var row: [String: AzureCoreDataFixture.Value] = ["id": .string(id)]
                    var final: JSONValue = ["id": .string(id)]
                    for (field, type) in Self.fields[table]! {
                        let value: JSONValue =
                            type == .string
                            ? .string("added offline \(index)") : type == .boolean ? .bool(true) : .int(7)
                        row[field] = Self.value(value, type)
                        final[field] = value
                    }
                    try old.addRow(table, row)
                    expected[table, default: [:]][id] = final
                    changes.append((table, id, .insert, nil))
                }
            }
            var random = SplitMix64(seed: 34)
            for index in changes.indices.dropLast() {
                changes.swapAt(index, index + Int(random.next() % UInt64(changes.count - index)))
            }
            // The item updated and then deleted while its update was being pushed: both operations stay queued.
            let x = synced["TodoItem"]![310]
            let xID = x["id"]!.stringValue!
            changes.insert((("TodoItem", xID, .update, nil)), at: 100)
            changes.insert((("TodoItem", xID, .delete, ["id": .string(xID), "version": x["version"]!])), at: 700)
            #expect(changes.count == 1_000)
            var operationIDs: [String: Int64] = [:]
            for change in changes {
                operationIDs[change.table + "/" + change.id] = old.addOperation(
                    table: change.table, itemID: change.id, type: change.type, item: change.item)
            }
            // The old app sent one insert and was killed before it read the reply: the server has it, the queue too.
            try await seeder.syncTable("TodoItem").insert(expected["TodoItem"]!["todoitem-new-3"]!)
            // Another device changed one of the edited items since: the old SDK parked its 412.
            let contested = synced["TodoItem"]![67]
            let contestedID = contested["id"]!.stringValue!
            var theirs = contested
            theirs["text"] = "changed by another device"
            try await seeder.syncTable("TodoItem").update(theirs)
            try await seeder.push()
            let serverItem = try #require(try await seeder.syncTable("TodoItem").item(id: ItemID(contestedID)))
            old.addError(
                operationID: operationIDs["TodoItem/" + contestedID]!, statusCode: 412,
                description: "The item has been modified on the server",
                item: ["id": .string(contestedID), "text": .string("edited offline \(contestedID)")],
                serverItem: serverItem)
            // Positions of two query ids, in the second round: rows of the first are older.
            let todoSince = WireDate(parsing: synced["TodoItem"]![60]["updatedAt"]!.stringValue!)!
            let noteSince = WireDate(parsing: synced["Note"]![200]["updatedAt"]!.stringValue!)!
            old.addDeltaToken(table: "TodoItem", queryID: "allTodoItems", updatedAt: todoSince)
            old.addDeltaToken(table: "Note", queryID: "notes", updatedAt: noteSince)
            let file = workspace.url.appendingPathComponent("QSTodoDataModel.sqlite")
            try old.write(to: file)

            // 3. The import.
            let store = try SQLiteLocalStore(path: workspace.path("device.sqlite"))
            let summary = try await store.importAzureMobileAppsStore(
                at: file, tables: Self.tables.map { .init($0, fields: Self.fields[$0]!) })
            print("import: \(summary)")
            #expect(summary.operationCount == 1_000)
            #expect(summary.operations == [.insert: 400, .update: 350, .delete: 250])
            #expect(summary.rows == ["TodoItem": 419, "Category": 345, "Note": 346])
            #expect(summary.errors == 1 && summary.positions.count == 2)

            // 4. The push: each operation once, in the SDK's order; the parked one waits for its resolution.
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let device = try await SyncClient.make(url, workspace: workspace, store: "device.sqlite") {
                $0.protocol = .v2
                $0.batchPush = .never
                $0.transport = transport
            }
            _ = try? await device.push()
            func sent(from start: Int) -> [String] {
                transport.requests[start...].compactMap { request -> String? in
                    let path = request.url.path.split(separator: "/").map(String.init)
                    guard path.count >= 2, path[0] == "tables" else { return nil }
                    switch request.method {
                    case "POST":
                        let id = (try? JSONValue(parsing: request.body ?? Data()))?["id"]?.stringValue ?? "?"
                        return "\(path[1].lowercased())/\(id) insert"
                    case "PATCH": return "\(path[1].lowercased())/\(path[2]) update"
                    case "DELETE": return "\(path[1].lowercased())/\(path[2]) delete"
                    default: return nil
                    }
                }
            }
            let expectedOrder = changes.compactMap { change -> String? in
                let key = change.table + "/" + change.id
                if key == "TodoItem/" + contestedID { return nil }  // parked
                if change.id == xID && change.type == .update { return nil }  // its row is gone: nothing to send
                return "\(key.lowercased()) \(change.type)"
            }
            let first = sent(from: 0)
            #expect(first == expectedOrder, "every operation once, in order (\(first.count) of \(expectedOrder.count))")
            let waiting = try await device.pendingOperations()
            #expect(waiting.map(\.itemID.rawValue) == [contestedID], "only the parked operation waits")
            let parked = try #require(try await device.operationErrors().first)
            #expect(parked.status == 412 && parked.serverItem?["text"] == "changed by another device")

            // Resolving it (mine wins) sends it, once.
            let before = transport.requests.count
            try await device.resolve(parked, with: .keepMine(nil))
            try await device.push()
            #expect(sent(from: before) == ["todoitem/\(contestedID) update"])
            #expect(try await device.pendingOperations().isEmpty)

            // 5. The first pull of each imported query id reads only rows updated at or after its position.
            for (table, queryID, since) in [
                ("TodoItem", "allTodoItems", todoSince), ("Note", "notes", noteSince),
            ] {
                let start = transport.requests.count
                let read = Locked(0)
                let pulled = try await device.syncTable(table).pull(queryID: QueryID(rawValue: queryID)!) { progress in
                    read.withLock { $0 = progress.appliedCount }
                }
                let asked = transport.requests[start].url.absoluteString.removingPercentEncoding ?? ""
                #expect(asked.contains("updatedAt ge datetimeoffset'\(since)'"), "\(asked)")
                let newer = try await Self.serverRows(url, table, since: since)
                let all = try await Self.serverRows(url, table)
                print(
                    "first pull of \(table)/\(queryID): \(pulled.requestCount) request(s), "
                        + "\(read.withLock { $0 }) rows read of \(all.count) on the server "
                        + "(\(newer.count) updated at or after \(since))")
                #expect(read.withLock { $0 } == newer.count)
                #expect(newer.count < all.count)
            }

            // 6. The tutorial goes on: a new item on the new SDK, and another device sees everything.
            try await device.syncTable("TodoItem").insert([
                "id": "after-the-move", "text": "Day one", "complete": false,
            ])
            try await device.push()
            expected["TodoItem"]!["after-the-move"] = ["id": "after-the-move", "text": "Day one", "complete": false]
            expected["TodoItem"]![contestedID]!["text"] = .string("edited offline \(contestedID)")
            let other = try await SyncClient.make(url, workspace: workspace, store: "other.sqlite") {
                $0.protocol = .v2
            }
            for table in Self.tables {
                let rows = try other.syncTable(table)
                try await rows.pull()
                let seen = try await rows.items()
                #expect(seen.count == expected[table]!.count, "\(table)")
                for item in seen {
                    let id = item["id"]!.stringValue!
                    guard let want = expected[table]![id] else {
                        Issue.record("\(table)/\(id) should not be on the server")
                        continue
                    }
                    for field in Self.fields[table]!.keys where item[field] != want[field] {
                        Issue.record(
                            "\(table)/\(id).\(field): \(String(describing: item[field])) ≠ \(String(describing: want[field]))"
                        )
                    }
                }
            }
        }
    }
}
