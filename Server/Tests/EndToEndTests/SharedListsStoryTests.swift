import Foundation
import SyncCore
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Issue 32's story with the real `todo` and `sync-server` processes, in both dialects, on the server of
/// docs/examples/shared-lists.json: Alice shares Groceries with Bob; Bob adds milk offline; Alice removes Bob; Bob's
/// device no longer shows Groceries nor its items, his pending milk is reported as refused, and Alice keeps every row.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SharedListsStoryTests {
    // A hang guard: each case took up to about 2 minutes in the whole suite on two cores (2026-11-28).
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "v3"])
    func bobRemovedWhileOfflineLosesTheListAndHearsOfHisMilk(protocol: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "todo-lists-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await SharedListsExample.withServer(
            database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path
        ) { port, secret in
            func device(_ user: String) async throws -> TutorialStoryTests.Device {
                try await SharedListsExample.device(
                    user, user: user, in: directory, port: port, secret: secret, dialect: `protocol`)
            }
            let (alice, bob) = (try await device("alice"), try await device("bob"))

            #expect(try await alice.run("lists", "new", "Groceries").status == 0)
            #expect(try await alice.run("add", "--list", "Groceries", "bread").status == 0)
            let noList = try await alice.run("add", "eggs")
            #expect(
                noList.status == 1 && noList.error.contains("--list"), "an item belongs to a list once there are lists")
            #expect(try await alice.run("share", "Groceries", "bob").output == "Shared Groceries with bob (editor).\n")
            #expect(try await alice.run("sync").status == 0)

            #expect(try await bob.run("sync").status == 0)
            #expect(try await bob.run("lists").output.contains("Groceries  — alice (owner), bob (editor)"))
            #expect(try await bob.run("list").output.contains("bread  [Groceries]"))

            // Bob adds milk without syncing; Alice removes him meanwhile.
            #expect(try await bob.run("add", "--list", "groceries", "milk").status == 0)
            #expect(try await alice.run("unshare", "Groceries", "bob").status == 0)
            #expect(try await alice.run("sync").status == 0)

            let synced = try await bob.run("sync")
            #expect(synced.status == 1, "a refused change waits")
            #expect(synced.output.contains("Removed 3 row(s) of lists no longer shared with you."), "\(synced.output)")
            #expect(synced.error.contains("1 refused change waiting"))
            #expect(try await bob.run("lists").output == "No lists.\n")
            #expect(try await bob.run("list").output.contains("milk  [a list no longer shared]"))
            #expect(!(try await bob.run("list", "--all").output.contains("bread")))
            let refused = try await bob.run("conflicts")
            #expect(
                refused.output.contains("Server refused insert")
                    && refused.output.contains("You may not write rows of group"))

            // Alice lost nothing; Bob's milk never reached the list.
            #expect(try await alice.run("sync").status == 0)
            let hers = try await alice.run("list", "--all").output
            #expect(hers.contains("bread  [Groceries]") && !hers.contains("milk"))
            #expect(try await alice.run("lists").output.contains("Groceries  — alice (owner)\n"))

            // Bob lets his milk go: nothing waits, nothing is left of the list.
            let milk = try #require(
                try await bob.run("list", "--json").output.split(separator: "\"id\":\"").dropFirst().first?.prefix(8))
            #expect(try await bob.run("resolve", String(milk), "--discard").status == 0)
            #expect(try await bob.run("sync").status == 0)
            #expect(try await bob.run("list", "--all").output == "No items.\n")
        }
    }

    /// Issue 44, items 9 and 10: Alice shares Groceries with Bob from two devices while offline (Bob gets two member
    /// rows); `todo share … --role viewer` makes him a viewer on both, so he can no longer add. A row another client
    /// replaced without `complete` (a v3 PUT leaves it null) does not keep `todo list` from showing the list.
    @Test(.timeLimit(.minutes(2)))
    func aRoleChangeReachesEveryMemberRowAndARowWithANullFieldIsShown() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-lists-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await SharedListsExample.withServer(
            database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path
        ) { port, secret in
            func device(_ name: String, user: String) async throws -> TutorialStoryTests.Device {
                try await SharedListsExample.device(name, user: user, in: directory, port: port, secret: secret)
            }
            let (phone, laptop, bob) = (
                try await device("phone", user: "alice"), try await device("laptop", user: "alice"),
                try await device("bob", user: "bob")
            )
            #expect(try await phone.run("lists", "new", "Groceries").status == 0)
            #expect(try await phone.run("add", "--list", "Groceries", "bread").status == 0)
            #expect(try await phone.run("sync").status == 0)
            #expect(try await laptop.run("sync").status == 0)
            // Both of Alice's devices share the list with Bob before either syncs: two member rows.
            #expect(try await phone.run("share", "Groceries", "bob").status == 0)
            #expect(try await laptop.run("share", "Groceries", "bob").status == 0)
            #expect(try await phone.run("sync").status == 0)
            #expect(try await laptop.run("sync").status == 0)
            #expect(try await phone.run("sync").status == 0)
            let rows = try JSONValue(parsing: try await phone.run("lists", "--json").output).arrayValue ?? []
            #expect(rows.count == 1)

            #expect(try await phone.run("share", "Groceries", "bob", "--role", "viewer").status == 0)
            #expect(try await phone.run("sync").status == 0)
            #expect(try await bob.run("sync").status == 0)
            #expect(try await bob.run("add", "--list", "Groceries", "milk").status == 0)
            let refused = try await bob.run("sync")
            #expect(refused.status == 1 && refused.error.contains("1 refused change waiting"), "\(refused.output)")

            // Another client replaces the item without `complete` (v3: a field left out is null).
            let bread = try #require(
                try await phone.run("list", "--json").output.split(separator: "\"id\":\"").dropFirst().first?
                    .prefix(while: { $0 != "\"" }))
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/tables/TodoItem/\(bread)")!)
            request.httpMethod = "PUT"
            request.setValue("3.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue(
                "Bearer \(try await developmentToken("alice", secret: secret))", forHTTPHeaderField: "Authorization")
            let listID = try #require(rows.first?["id"]?.stringValue)
            request.httpBody = Data(#"{"id": "\#(bread)", "text": "rye bread", "listId": "\#(listID)"}"#.utf8)
            let (_, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try await phone.run("sync").status == 0)
            let shown = try await phone.run("list", "--all")
            #expect(shown.status == 0 && shown.output.contains("rye bread"), "\(shown.output)\(shown.error)")
        }
    }

    /// `todo watch` on Bob's device (the SDK's automatic sync) follows his scope: Alice unshares while it runs, and the
    /// list's item leaves the screen without a keypress — the items' own pulls see the token change.
    @Test(.timeLimit(.minutes(1)))
    func todoWatchShowsAListLeavingWithoutAKeypress() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-lists-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await SharedListsExample.withServer(
            database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path
        ) { port, secret in
            func environment(_ user: String) async throws -> [String: String] {
                [
                    "TODO_STORE": directory.appendingPathComponent("\(user).sqlite").path,
                    "TODO_URL": "http://127.0.0.1:\(port)",
                    "TODO_TOKEN": try await developmentToken(user, secret: secret),
                ]
            }
            let alice = TutorialStoryTests.Device(environment: try await environment("alice"))
            let bobEnvironment = try await environment("bob")
            let bob = TutorialStoryTests.Device(environment: bobEnvironment)
            #expect(try await alice.run("lists", "new", "Groceries").status == 0)
            #expect(try await alice.run("add", "--list", "Groceries", "bread").status == 0)
            #expect(try await alice.run("share", "Groceries", "bob").status == 0)
            #expect(try await alice.run("sync").status == 0)
            #expect(try await bob.run("sync").status == 0)

            let watch = await TodoWatch(environment: bobEnvironment)
            try await watch.waitFor("bread")
            #expect(try await alice.run("unshare", "Groceries", "bob").status == 0)
            #expect(try await alice.run("sync").status == 0)
            try await watch.waitFor("No open items.", after: watch.mark)
            await watch.finish()
        }
    }
}

/// The server of docs/examples/shared-lists.json (the shared lists' tables behind tokens), as a process.
enum SharedListsExample {
    /// The example's configuration file.
    static let configuration = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "docs/examples/shared-lists.json")

    /// The environment of a `todo` device of `user` with its store `name` in `directory`, on the example's server at
    /// `port`, speaking `dialect` (the default when nil).
    static func device(
        _ name: String, user: String, in directory: URL, port: Int, secret: String, dialect: String? = nil
    ) async throws -> TutorialStoryTests.Device {
        var environment = [
            "TODO_STORE": directory.appendingPathComponent("\(name).sqlite").path,
            "TODO_URL": "http://127.0.0.1:\(port)", "TODO_TOKEN": try await developmentToken(user, secret: secret),
        ]
        environment["TODO_PROTOCOL"] = dialect
        return TutorialStoryTests.Device(environment: environment)
    }

    /// Runs `body` with `sync-server` on the example over `database` (its port, and the secret its tokens take), and
    /// stops the server however `body` ends.
    static func withServer(database: String, _ body: (Int, String) async throws -> Void) async throws {
        let secret = try #require(
            try JSONValue(parsing: Data(contentsOf: configuration))["auth"]?["hs256Secret"]?.stringValue)
        let port = try freePort()
        try await withServerProcess(port: port, database: database, options: ["--config", configuration.path]) { _ in
            try await body(port, secret)
        }
    }
}
