import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The tutorial's story with the real `todo` and `sync-server` processes, two devices (two stores), once with the
/// devices speaking v2 and once v3 (`TODO_PROTOCOL`), against the one server that serves both.
@Suite(.serialized, .timeLimit(.minutes(3))) struct TutorialStoryTests {
    struct Device {
        let environment: [String: String]

        func run(_ arguments: String...) async throws -> CommandResult {
            try await runProduct("todo", arguments, environment: environment)
        }

        /// `todo list --all --json`, as id → (text, complete).
        func items() async throws -> [String: String] {
            let result = try await run("list", "--all", "--json")
            guard result.status == 0 else { throw ProcessError("list failed: \(result.error)") }
            let items = try JSONValue(parsing: result.output).arrayValue ?? []
            return Dictionary(
                uniqueKeysWithValues: items.map {
                    (
                        $0["id"]?.stringValue ?? "",
                        "\($0["text"]?.stringValue ?? "")|\($0["complete"]?.boolValue ?? false)"
                    )
                })
        }
    }

    /// The server's live items, read in the dialect the devices do not speak: what they wrote is visible through
    /// both.
    static func serverItems(_ port: Int, devicesSpeak deviceProtocol: String) async throws -> [String: String] {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/tables/TodoItem?$top=1000")!)
        request.setValue(deviceProtocol == "v2" ? "3.0.0" : "2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
        let (data, _) = try await URLSession.shared.data(for: request)
        let body = try JSONValue(parsing: data)
        let items = body.arrayValue ?? body["items"]?.arrayValue ?? []
        return Dictionary(
            uniqueKeysWithValues: items.map {
                ($0["id"]?.stringValue ?? "", "\($0["text"]?.stringValue ?? "")|\($0["complete"]?.boolValue ?? false)")
            })
    }

    // A hang guard: each case took up to about 2 minutes in the whole suite on two cores (2026-11-28).
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "v3"])
    func theOfflineStoryEndsWithBothDevicesAndTheServerInAgreement(protocol: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Held while the server is down: another suite's server must not take the port meanwhile (one with tokens
        // did once, and the offline sync met its 401).
        let reservation = try PortReservation()
        let port = reservation.port
        let url = "http://127.0.0.1:\(port)"
        let a = Device(environment: [
            "TODO_STORE": directory.appendingPathComponent("a/todo.sqlite").path, "TODO_URL": url,
            "TODO_PROTOCOL": `protocol`,
        ])
        let b = Device(environment: [
            "TODO_STORE": directory.appendingPathComponent("b/todo.sqlite").path, "TODO_URL": url,
            "TODO_PROTOCOL": `protocol`,
        ])
        let serverItems = { try await Self.serverItems(port, devicesSpeak: `protocol`) }

        // The server is down: device A adds three items and completes one.
        for text in ["Buy milk", "Walk the dog", "Call mom"] { #expect(try await a.run("add", text).status == 0) }
        let walk = try #require(try await a.items().first { $0.value.hasPrefix("Walk the dog") }?.key)
        #expect(try await a.run("complete", String(walk.prefix(6))).status == 0)
        let offline = try await a.run("sync")
        #expect(offline.status == 2)
        #expect(
            offline.error.contains(
                "Server unreachable at \(url) — your 3 changes are kept and will be sent on the next sync"))

        // A new process (a restart): the items are still there.
        #expect(try await a.items().count == 3)
        #expect(try await a.items()[walk] == "Walk the dog|true")

        // The server comes up: it has none of them until A syncs.
        reservation.release()
        try await withServerProcess(
            port: port, database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path
        ) { _ in
            #expect(try await serverItems().isEmpty)
            #expect(try await a.run("sync").status == 0)
            #expect(try await serverItems() == (try await a.items()))

            // Device B syncs and sees them.
            #expect(try await b.run("sync").status == 0)
            #expect(try await b.items() == (try await a.items()))

            // Both edit the same item offline; A syncs first, so B meets a conflict.
            let milk = try #require(try await a.items().first { $0.value.hasPrefix("Buy milk") }?.key)
            #expect(try await a.run("edit", String(milk.prefix(8)), "Buy oat milk").status == 0)
            #expect(try await b.run("edit", String(milk.prefix(8)), "Buy almond milk").status == 0)
            #expect(try await a.run("sync").status == 0)
            let conflicted = try await b.run("sync")
            #expect(conflicted.status == 1)
            #expect(conflicted.error == "todo: 1 conflict waiting: see `todo conflicts`\n")
            // A waiting conflict is reported by every later sync, which still pulls.
            let again = try await b.run("sync")
            #expect(again.status == 1)
            #expect(again.output.contains("sent 0 change(s), received 0 item(s)"))
            #expect(again.error == "todo: 1 conflict waiting: see `todo conflicts`\n")
            #expect(try await b.run("status").output.contains("Conflicts:  1 (see `todo conflicts`)"))
            let conflicts = try JSONValue(parsing: try await b.run("conflicts", "--json").output).arrayValue ?? []
            #expect(conflicts.count == 1)
            #expect(conflicts.first?["mine"]?["text"] == "Buy almond milk")
            #expect(conflicts.first?["server"]?["text"] == "Buy oat milk")
            let sideBySide = try await b.run("conflicts").output
            #expect(
                sideBySide.contains("mine:   [ ] Buy almond milk") && sideBySide.contains("server: [ ] Buy oat milk"))
            // Both changed the text: the conflict names it and shows what it was (issue 47).
            #expect(sideBySide.contains("you and someone else changed the same thing"))
            #expect(sideBySide.contains("both changed: text") && sideBySide.contains("before: [ ] Buy milk"))
            #expect(conflicts.first?["fields"] == ["text"])
            #expect(conflicts.first?["base"]?["text"]?.stringValue?.hasPrefix("Buy milk") == true)
            #expect(sideBySide.contains("todo resolve \(milk.prefix(8)) --take-server"))

            // B takes the server's version; everyone agrees.
            #expect(try await b.run("resolve", String(milk.prefix(8)), "--take-server").status == 0)
            #expect(try await b.run("sync").status == 0)
            #expect(try await a.run("sync").status == 0)
            #expect(try await a.run("sync").output.contains("received 0 item(s)"))  // nothing changed since
            let truth = try await serverItems()
            #expect(truth[milk] == "Buy oat milk|false")
            #expect(try await a.items() == truth)
            #expect(try await b.items() == truth)
            #expect(try JSONValue(parsing: try await b.run("status", "--json").output)["pending"] == 0)
        }
    }

    /// Issue 15's story: a server with `auth` and a per-user `TodoItem`; tokens from `sync-server token`. Alice on
    /// two devices sees one list, Bob never sees hers nor she his; an expired token is a "sign in again" error
    /// that keeps the change, which arrives once a new token is in the token file.
    @Test(.timeLimit(.minutes(2)), arguments: ["v2", "v3"])
    func usersSeeOnlyTheirOwnItemsAndAnExpiredTokenLosesNothing(protocol: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-auth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = "tutorial-secret-0123456789abcdef-0123"
        let config = directory.appendingPathComponent("server.json")
        try
            #"{"auth": {"hs256Secret": "\#(secret)", "clockSkewSeconds": 0}, "tables": [{"name": "TodoItem", "perUser": true}]}"#
            .write(to: config, atomically: true, encoding: .utf8)
        func token(_ subject: String, ttl: Int = 600) async throws -> String {
            try await developmentToken(subject, secret: secret, ttl: ttl)
        }
        let port = try freePort()
        try await withServerProcess(
            port: port, database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path,
            options: ["--config", config.path]
        ) { _ in
            let url = "http://127.0.0.1:\(port)"
            func device(_ name: String, _ credentials: [String: String]) -> Device {
                Device(
                    environment: [
                        "TODO_STORE": directory.appendingPathComponent("\(name)/todo.sqlite").path, "TODO_URL": url,
                        "TODO_PROTOCOL": `protocol`,
                    ]
                    .merging(credentials) { $1 })
            }
            let tokenFile = directory.appendingPathComponent("alice.token")
            try await token("alice").write(to: tokenFile, atomically: true, encoding: .utf8)
            let phone = device("alice-phone", ["TODO_TOKEN_FILE": tokenFile.path])
            let laptop = device("alice-laptop", ["TODO_TOKEN": try await token("alice")])
            let bob = device("bob", ["TODO_TOKEN": try await token("bob")])
            let stranger = device("stranger", [:])

            for text in ["Buy milk", "Call mom"] { #expect(try await phone.run("add", text).status == 0) }
            #expect(try await bob.run("add", "Fix the bike").status == 0)
            #expect(try await phone.run("sync").status == 0)
            #expect(try await bob.run("sync").status == 0)
            #expect(try await laptop.run("sync").status == 0)
            #expect(try await laptop.items() == (try await phone.items()))
            #expect(Set(try await laptop.items().values) == ["Buy milk|false", "Call mom|false"])
            #expect(try await bob.run("sync").status == 0)
            #expect(Array(try await bob.items().values) == ["Fix the bike|false"])
            let refused = try await stranger.run("sync")
            #expect(refused.status == 3)
            #expect(refused.error.contains("Sign in again"))

            // The phone's token expires (a one-second token, no clock skew); a change made meanwhile is kept.
            try await token("alice", ttl: 1).write(to: tokenFile, atomically: true, encoding: .utf8)
            try await Task.sleep(for: .seconds(2))
            #expect(try await phone.run("add", "Water the plants").status == 0)
            let expired = try await phone.run("sync")
            #expect(expired.status == 3)
            #expect(
                expired.error.contains(
                    "Sign in again: the server refused your token (expired or not valid) — put a new token in \(tokenFile.path); your 1 change is kept"
                ))
            #expect(try JSONValue(parsing: try await phone.run("status", "--json").output)["pending"] == 1)

            try await token("alice").write(to: tokenFile, atomically: true, encoding: .utf8)
            #expect(try await phone.run("sync").status == 0)
            #expect(try await laptop.run("sync").status == 0)
            #expect(try await laptop.items().count == 3)
            #expect(try await bob.run("sync").status == 0)
            #expect(try await bob.items().count == 1)
        }
    }

    /// Issue 16, point 5: `todo watch` on device A shows an item device B adds, with no key pressed and no sync
    /// command on A (its automatic sync pulls every 0.3 s), and its status line says it synced.
    @Test(.timeLimit(.minutes(1)), arguments: ["v2", "v3"])
    func todoWatchShowsAnotherDevicesItemWithoutAKeypress(protocol: String) async throws {
        try await Self.withServerInScratch("todo-watch") { directory, port in
            let url = "http://127.0.0.1:\(port)"
            let b = Device(environment: [
                "TODO_STORE": directory.appendingPathComponent("b/todo.sqlite").path, "TODO_URL": url,
                "TODO_PROTOCOL": `protocol`,
            ])

            let watch = await TodoWatch(environment: [
                "TODO_STORE": directory.appendingPathComponent("a/todo.sqlite").path, "TODO_URL": url,
                "TODO_PROTOCOL": `protocol`,
            ])
            try await watch.waitFor("No open items.")
            #expect(try await b.run("add", "Buy bread").status == 0)
            #expect(try await b.run("sync").status == 0)
            try await watch.waitFor("Buy bread")
            try await watch.waitFor("synced ")
            await watch.finish()
        }
    }

    /// Runs `body` with a scratch folder and a `sync-server` on SQLite in it (the folder and the server's port); stops
    /// the one and removes the other however `body` ends.
    static func withServerInScratch(_ prefix: String, _ body: (URL, Int) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = try freePort()
        try await withServerProcess(
            port: port, database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path
        ) { _ in try await body(directory, port) }
    }

    /// `todo session` (what sync-chaos's devices run): the commands of one process answer as separate processes
    /// would — output, error message and exit status — and one killed mid-way leaves its store to the next process,
    /// which syncs what the others wrote.
    @Test(.timeLimit(.minutes(2))) func aSessionAnswersAsSeparateProcessesWould() async throws {
        try await Self.withServerInScratch("todo-session") { directory, port in
            let environment = [
                "TODO_STORE": directory.appendingPathComponent("device.sqlite").path,
                "TODO_URL": "http://127.0.0.1:\(port)",
            ]
            let session = CommandSession(Products.path("todo"), ["session"], environment: environment)
            func run(_ arguments: String...) async throws -> CommandResult { try await run(arguments) }
            func run(_ arguments: [String]) async throws -> CommandResult {
                try await session.run(String(decoding: try JSONEncoder().encode(arguments), as: UTF8.self))
            }
            let added = try await run("add", "milk")
            #expect(added.status == 0 && added.output.hasPrefix("Added ") && added.output.hasSuffix("  milk\n"))
            // The same failures, the same words and statuses as a process of their own; also where a session parses
            // the subcommand alone first (`Session.parse`): help, a failed `validate()`, a default subcommand.
            let failing = [
                ["edit", "zzz", "x"], ["frob"], ["add"], ["list", "--bogus"], ["resolve", "zzz"],
                ["share", "home", "bob", "--role", "boss"], ["lists", "--bogus"],
            ]
            for arguments in failing + [["list", "--help"], ["lists"], ["lists", "new", "--help"]] {
                let alone = try await runProduct("todo", arguments, environment: environment)
                let inSession = try await run(arguments)
                #expect((alone.status != 0) == failing.contains(arguments), "\(arguments)")
                #expect(inSession.status == alone.status, "\(arguments)")
                #expect(inSession.error == alone.error && inSession.output == alone.output, "\(arguments)")
            }
            let notJSON = try await session.run("add milk")
            #expect(notJSON.status == 64 && notJSON.error.contains("not a JSON array"))
            #expect(try await run("add", "eggs").status == 0)
            // A sync killed mid-way: the next command is a new process on the same store, and nothing is lost.
            let killed = try await session.run(#"["sync"]"#, killAfter: .milliseconds(1))
            #expect(killed.wasKilled || killed.status == 0)
            let synced = try await run("sync")
            #expect(synced.status == 0, "\(synced.error)")
            let listed = try await run("list", "--json")
            let texts = (try JSONValue(parsing: listed.output).arrayValue ?? []).compactMap { $0["text"]?.stringValue }
            #expect(texts.sorted() == ["eggs", "milk"])
            #expect(session.processesStarted == (killed.wasKilled ? 2 : 1))
            await session.close()
            let onServer = try await Self.serverItems(port, devicesSpeak: "v2")
            #expect(onServer.values.map { $0.split(separator: "|")[0] }.sorted() == ["eggs", "milk"])
        }
    }

    /// The move from the Azure Mobile Apps iOS SDK (issue 34) with the real processes: the old app's Core Data store —
    /// an item edited and one deleted offline, two added — is imported with `todo import-ama`, once; `todo sync` sends
    /// the four changes and another device sees them. A file that is not such a store is refused in one line.
    @Test(.timeLimit(.minutes(2))) func theOldAppsStoreComesAlongWithItsUnsentChanges() async throws {
        try await Self.withServerInScratch("todo-ama") { directory, port in
            let url = "http://127.0.0.1:\(port)"
            let device = Device(environment: [
                "TODO_STORE": directory.appendingPathComponent("new/todo.sqlite").path, "TODO_URL": url,
            ])
            let other = Device(environment: [
                "TODO_STORE": directory.appendingPathComponent("other/todo.sqlite").path, "TODO_URL": url,
            ])

            // What the old app had synced, read from the server as it had it.
            for text in ["Water the plants", "Pay the rent"] { #expect(try await other.run("add", text).status == 0) }
            #expect(try await other.run("sync").status == 0)
            var request = URLRequest(url: URL(string: "\(url)/tables/TodoItem")!)
            request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
            let synced = try JSONValue(parsing: try await URLSession.shared.data(for: request).0).arrayValue ?? []
            let plants = try #require(synced.first { $0["text"] == "Water the plants" })
            let rent = try #require(synced.first { $0["text"] == "Pay the rent" })
            func date(_ value: JSONValue?) -> AzureCoreDataFixture.Value {
                .date(
                    Date(
                        timeIntervalSince1970: Double(
                            WireDate(parsing: value?.stringValue ?? "")!.millisecondsSince1970)
                            / 1000))
            }
            var old = AzureCoreDataFixture(entities: [.init("TodoItem", ["text": .string, "complete": .boolean])])
            try old.addRow(
                "TodoItem",
                [
                    "id": .string(plants["id"]!.stringValue!), "text": .string("Water the plants"),
                    "complete": .bool(true),
                    "version": .string(plants["version"]!.stringValue!), "createdAt": date(plants["createdAt"]),
                    "updatedAt": date(plants["updatedAt"]), "deleted": .bool(false),
                ])
            old.addOperation(table: "TodoItem", itemID: plants["id"]!.stringValue!, type: .update)
            old.addOperation(
                table: "TodoItem", itemID: rent["id"]!.stringValue!, type: .delete,
                item: ["id": rent["id"]!, "version": rent["version"]!])
            for (id, text) in [("old-1", "Added on the old app"), ("old-2", "Also added offline")] {
                try old.addRow("TodoItem", ["id": .string(id), "text": .string(text), "complete": .bool(false)])
                old.addOperation(table: "TodoItem", itemID: id, type: .insert)
            }
            old.addDeltaToken(
                table: "TodoItem", queryID: "allTodoItems",
                updatedAt: WireDate(parsing: rent["updatedAt"]!.stringValue!)!)
            let file = directory.appendingPathComponent("QSTodoDataModel.sqlite")
            try old.write(to: file)

            let imported = try await device.run("import-ama", file.path)
            print(imported.output)
            #expect(imported.status == 0, "\(imported.error)")
            #expect(imported.output.contains("items: 3"))
            #expect(imported.output.contains("changes waiting to be sent: 4 (1 delete, 2 insert, 1 update)"))
            #expect(
                imported.output.contains("pull position: TodoItem/allTodoItems from \(rent["updatedAt"]!.stringValue!)")
            )
            let again = try await device.run("import-ama", file.path)
            #expect(again.status == 0 && again.output.contains("Already imported"), "\(again.output)")
            #expect(try await device.items().count == 3)

            #expect(try await device.run("sync").status == 0)
            #expect(try await other.run("sync").status == 0)
            let expected = [
                plants["id"]!.stringValue!: "Water the plants|true", "old-1": "Added on the old app|false",
                "old-2": "Also added offline|false",
            ]
            #expect(try await device.items() == expected)
            #expect(try await other.items() == expected)
            #expect(try await Self.serverItems(port, devicesSpeak: "v2") == expected)

            // Not such a store: one line, and the new store untouched.
            let notes = directory.appendingPathComponent("notes.txt")
            try Data("a grocery list\n".utf8).write(to: notes)
            let stranger = Device(environment: [
                "TODO_STORE": directory.appendingPathComponent("third/todo.sqlite").path, "TODO_URL": url,
            ])
            let refused = try await stranger.run("import-ama", notes.path)
            #expect(refused.status == 1)
            #expect(refused.error == "todo: Not imported: notes.txt is not an SQLite file\n")
            #expect(try await stranger.items().isEmpty)
        }
    }

    /// An import killed with SIGKILL (issue 34) at moments spread over an uninterrupted one's duration leaves the new
    /// store as it was or holds all of it — never a part — and the next `todo import-ama` completes it; the old file's
    /// bytes never change. A store of 20,000 rows, each with a pending insert, makes the import last long enough.
    /// The processes get an empty folder of the test's as `TMPDIR`, which stays empty: a killed import leaves its copy
    /// of the old file beside the new store, never in the temporary directory (issue 63: 77 copies were found there),
    /// and the next import removes it.
    @Test(.timeLimit(.minutes(3))) func anImportKilledMidwayLeavesAllOrNothingAndIsDoneAgain() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-ama-\(UUID().uuidString)")
        let temporary = directory.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func leftInTemporary() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: temporary.path)
        }
        var old = AzureCoreDataFixture(entities: [.init("TodoItem", ["text": .string, "complete": .boolean])])
        let count = 20_000
        for index in 0..<count {
            try old.addRow(
                "TodoItem", ["id": .string("i\(index)"), "text": .string("item \(index)"), "complete": .bool(false)])
            old.addOperation(table: "TodoItem", itemID: "i\(index)", type: .insert)
        }
        let file = directory.appendingPathComponent("QSTodoDataModel.sqlite")
        try old.write(to: file)
        let bytes = try Data(contentsOf: file)
        func pending(_ store: String) async throws -> (operations: Int, items: Int) {
            let client = SyncClient(url: URL(string: "http://127.0.0.1:9")!, store: try SQLiteLocalStore(path: store))
            return (try await client.pendingOperations().count, try await client.syncTable("TodoItem").count())
        }

        let clock = ContinuousClock()
        let whole = try await clock.measure {
            let result = try await runProduct(
                "todo", ["import-ama", file.path],
                environment: [
                    "TODO_STORE": directory.appendingPathComponent("whole.sqlite").path, "TMPDIR": temporary.path,
                ],
                timeout: .seconds(120))
            #expect(result.status == 0, "\(result.error)")
        }
        var outcomes: [String] = []
        for (attempt, fraction) in [0.3, 0.6, 0.8, 0.88, 0.94, 0.98].enumerated() {
            let store = directory.appendingPathComponent("killed-\(attempt).sqlite").path
            _ = try await runCommand(
                Products.path("todo"), ["import-ama", file.path],
                environment: ["TODO_STORE": store, "TMPDIR": temporary.path], killAfter: whole * fraction)
            #expect(try leftInTemporary() == [], "a killed import leaves nothing in the temporary directory")
            // Frames of a transaction that never committed are in the -wal: the kill came during the write.
            let written = (try? FileManager.default.attributesOfItem(atPath: store + "-wal")[.size] as? Int) ?? 0
            let after = try await pending(store)
            #expect(after.operations == 0 || after.operations == count, "all or nothing: \(after)")
            #expect(after.items == (after.operations == 0 ? 0 : count), "rows and queue together: \(after)")
            outcomes.append(after.operations == 0 ? "nothing (-wal \(written / 1024) KiB)" : "all")
            let again = try await runProduct(
                "todo", ["import-ama", file.path], environment: ["TODO_STORE": store, "TMPDIR": temporary.path],
                timeout: .seconds(120))
            #expect(again.status == 0, "\(again.error)")
            #expect(!FileManager.default.fileExists(atPath: store + "-import"), "the next import removed the copy")
            #expect(try await pending(store) == (count, count))
        }
        print("import of \(count) rows and operations: \(whole) whole; killed at 30–98 %: \(outcomes)")
        #expect(try Data(contentsOf: file) == bytes, "the old file is never written")
    }
}

/// A `todo watch --interval 0.3` process and what it has printed so far.
final class TodoWatch: Sendable {
    private let process: RunningProcess

    init(environment: [String: String]) async {
        process = await RunningProcess(Products.path("todo"), ["watch", "--interval", "0.3"], environment: environment)
    }

    /// Where the output ends now: ``waitFor(_:after:)`` from here looks only at what comes next.
    var mark: Int { process.printed.utf8.count }

    /// Waits (up to 15 s) until the output shows `text` (after `start`, when given); an issue when it never does.
    func waitFor(_ text: String, after start: Int = 0) async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        let found = { String(decoding: self.process.printed.utf8.dropFirst(start), as: UTF8.self).contains(text) }
        while !found(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(found(), "todo watch never showed '\(text)': \(process.printed)")
    }

    /// Ends the process (SIGTERM) and waits for it; a watch dropped before is killed.
    func finish() async { await process.stop() }
}
