import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import SyncSQLite
import Testing

@testable import SyncServer

/// Write hooks (issue 31): each kind refusing with the app's status and message (nothing written), transforming
/// the fields written, and failing safely (500, nothing written) — on both stores, in both dialects and in a batch.
/// The read hook: its filter and hidden columns on every read and write path, its refusal, its failure.
@Suite(.timeLimit(.minutes(3))) struct TableHookTests {
    static let v3: HTTPFields = [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"]

    /// Refuses texts that say "forbidden" and items named "keep" from being deleted or undeleted; stamps inserts
    /// and updates with `stamp` and upper-cases their text; `bad` items make the hook change a system property,
    /// `boom` ones make it fail.
    static let hooks: TableHooks = {
        let check: TableHooks.Hook = { write in
            let text = write.fields["text"]?.stringValue
            if text == "forbidden" { throw RequestRefusal(.forbidden, "No forbidden texts (\(write.kind.rawValue))") }
            if text == "bad" { write.fields["updatedAt"] = "2000-01-01T00:00:00.000Z" }
            if text == "boom" { throw CocoaError(.fileNoSuchFile) }
            if let text { write.fields["text"] = .string(text.uppercased()) }
            write.fields["stamp"] = .string(write.kind.rawValue)
        }
        let keep: TableHooks.Hook = { write in
            if write.id.rawValue == "keep" { throw RequestRefusal(.conflict, "'keep' stays (\(write.kind.rawValue))") }
        }
        return TableHooks(beforeInsert: check, beforeUpdate: check, beforeDelete: keep, beforeUndelete: keep)
    }()

    static func withServer(_ backend: Backend, _ body: @Sendable (any TestClientProtocol) async throws -> Void)
        async throws
    {
        try await Fixture.withServer(
            backend, tables: [Fixture.table("TodoItem")],
            configure: { $0.hooks = ["todoitem": Self.hooks] }, body)
    }

    @Test(arguments: Backend.all) func insertAndUpdateHooksTransformAndRefuse(_ backend: Backend) async throws {
        try await Self.withServer(backend) { client in
            // v2 insert and PATCH.
            let inserted = try await client.send(.post, "/tables/TodoItem", json: ["id": "a", "text": "milk"])
            #expect(inserted.status == .created)
            #expect(inserted.json?["text"] == "MILK" && inserted.json?["stamp"] == "insert")
            let patched = try await client.send(.patch, "/tables/TodoItem/a", json: ["text": "eggs"])
            #expect(patched.json?["text"] == "EGGS" && patched.json?["stamp"] == "update")
            let refused = try await client.send(.post, "/tables/TodoItem", json: ["id": "b", "text": "forbidden"])
            #expect(refused.status == .forbidden && refused.error == "No forbidden texts (insert)")
            #expect(try await client.send(.get, "/tables/TodoItem/b").status == .notFound)
            let refusedPatch = try await client.send(.patch, "/tables/TodoItem/a", json: ["text": "forbidden"])
            #expect(refusedPatch.status == .forbidden)

            // v3 insert and PUT, on the same table.
            let v3Insert = try await client.send(
                .post, "/tables/TodoItem", json: ["id": "c", "text": "tea"], headers: Self.v3, versioned: false)
            #expect(v3Insert.status == .created && v3Insert.json?["text"] == "TEA")
            let put = try await client.send(
                .put, "/tables/TodoItem/c", json: ["id": "c", "text": "forbidden"], headers: Self.v3, versioned: false)
            #expect(put.status == .forbidden && put.error == "No forbidden texts (update)")
            let replaced = try await client.send(
                .put, "/tables/TodoItem/c", json: ["id": "c", "text": "coffee"], headers: Self.v3, versioned: false)
            #expect(replaced.json?["text"] == "COFFEE" && replaced.json?["stamp"] == "update")

            // What the refusals left: the rows as the accepted writes made them.
            #expect(try await client.send(.get, "/tables/TodoItem/a").json?["text"] == "EGGS")
            #expect(try await client.send(.get, "/tables/TodoItem/c").json?["text"] == "COFFEE")
        }
    }

    @Test(arguments: Backend.all) func deleteAndUndeleteHooksRefuse(_ backend: Backend) async throws {
        try await Self.withServer(backend) { client in
            for id in ["keep", "go"] {
                #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": .string(id)]).status == .created)
            }
            let refused = try await client.send(.delete, "/tables/TodoItem/keep")
            #expect(refused.status == .conflict && refused.error == "'keep' stays (delete)")
            let v3Refused = try await client.send(.delete, "/tables/TodoItem/keep", headers: Self.v3, versioned: false)
            #expect(v3Refused.status == .conflict)
            #expect(try await client.send(.get, "/tables/TodoItem/keep").status == .ok)
            #expect(try await client.send(.delete, "/tables/TodoItem/go").status == .ok)
            #expect(try await client.send(.post, "/tables/TodoItem/go").status == .ok)  // undelete: not "keep"
        }
        // An undelete of "keep" is refused: the hook sees the id even for a tombstone.
        try await Fixture.withServer(
            backend, tables: [Fixture.table("TodoItem")],
            configure: { $0.hooks = ["TodoItem": TableHooks(beforeUndelete: Self.hooks.beforeDelete)] }
        ) { client in
            #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": "keep"]).status == .created)
            #expect(try await client.send(.delete, "/tables/TodoItem/keep").status == .ok)
            let refused = try await client.send(.post, "/tables/TodoItem/keep")
            #expect(refused.status == .conflict && refused.error == "'keep' stays (undelete)")
            #expect(try await client.send(.get, "/tables/TodoItem/keep").status == .notFound)
        }
    }

    @Test(arguments: Backend.all) func aHookThatFailsOrChangesASystemPropertyWritesNothing(_ backend: Backend)
        async throws
    {
        try await Self.withServer(backend) { client in
            for text in ["bad", "boom"] {
                let reply = try await client.send(
                    .post, "/tables/TodoItem", json: ["id": .string(text), "text": .string(text)])
                #expect(reply.status == .internalServerError)
                #expect(!reply.text.contains("fileNoSuchFile") && !reply.text.contains("updatedAt"))
                #expect(try await client.send(.get, "/tables/TodoItem/\(text)").status == .notFound)
            }
        }
    }

    @Test func hooksRunForTheOperationsOfABatch() async throws {
        try await Self.withServer(.sqlite) { client in
            let batch: JSONValue = [
                "requests": [
                    ["method": "POST", "url": "tables/TodoItem", "body": ["id": "x", "text": "bread"]],
                    ["method": "POST", "url": "tables/TodoItem", "body": ["id": "y", "text": "forbidden"]],
                ]
            ]
            let reply = try await client.send(.post, "/batch", json: batch)
            #expect(reply.status == .ok)
            let answers = reply.json?["responses"]?.arrayValue ?? []
            #expect(answers.map { $0["status"]?.intValue } == [201, 403])
            #expect(try await client.send(.get, "/tables/TodoItem/x").json?["text"] == "BREAD")
        }
    }

    /// The read hook of `Task`: `alice` is in team red, `bob` in blue, `root` sees everything, anyone else is
    /// refused; team callers never see `cost` (named `COST` in the view: names compare without regard to case). The insert hook sets the row's team from the caller and its cost.
    static let teamHooks = TableHooks(
        read: { read in
            switch read.caller?.subject {
            case "root"?: return .everything
            case "alice"?, "bob"?:
                let team = read.caller?.subject == "alice" ? "red" : "blue"
                return TableView(
                    filter: .binary(.eq, .member("team"), .literal(.string(team))), hiddenColumns: ["COST"])
            case "boom"?: throw CocoaError(.fileNoSuchFile)
            default: throw RequestRefusal(.forbidden, "You are in no team")
            }
        },
        beforeInsert: { write in
            write.fields["team"] = write.caller?.subject == "alice" ? "red" : "blue"
            write.fields["cost"] = write.fields["cost"] ?? 5
        })

    static func withTeams(_ backend: Backend, _ body: @Sendable (any TestClientProtocol) async throws -> Void)
        async throws
    {
        try await Fixture.withServer(
            backend, tables: [Fixture.table("Task")],
            configure: {
                $0.auth = AuthTests.auth
                $0.auth?.console = .restricted(subjects: ["root", "alice"], roles: [])
                $0.hooks = ["Task": Self.teamHooks]
            }, body)
    }

    /// Every path by which alice could reach bob's row (v2 and v3 items, writes, undelete, an insert of its id,
    /// pages, counts, a filter on it, a batch) answers as for a missing row; `cost` appears nowhere alice looks —
    /// not in items, pages, write answers, conflicts or the console — cannot be filtered, sorted or selected, and
    /// what she sends for it is dropped (a PATCH and a v3 replace leave it as the hook set it).
    @Test(arguments: Backend.all) func theReadHookScopesEveryPathAndHidesColumns(_ backend: Backend) async throws {
        let alice = AuthTests.bearer(try await AuthTests.token("alice"))
        let bob = AuthTests.bearer(try await AuthTests.token("bob"))
        let root = AuthTests.bearer(try await AuthTests.token("root"))
        let v3Alice = HTTPFields(Array(alice) + Array(Self.v3))
        try await Self.withTeams(backend) { (client: any TestClientProtocol) async throws in
            let mine = try await client.send(
                .post, "/tables/Task", json: ["id": "r1", "text": "paint", "cost": 99, "team": "blue"], headers: alice)
            #expect(mine.status == .created && mine.json?["team"] == "red" && mine.json?["cost"] == nil)
            #expect(try await client.send(.post, "/tables/Task", json: ["id": "b1"], headers: bob).status == .created)

            for (method, path, body) in [
                (HTTPRequest.Method.get, "/tables/Task/b1", nil),
                (.patch, "/tables/Task/b1", ["text": "x"] as JSONValue),
                (.delete, "/tables/Task/b1", nil), (.post, "/tables/Task/b1", nil),
            ] {
                let reply = try await client.send(method, path, json: body, headers: alice)
                #expect(reply.status == .notFound && reply.error == "The item does not exist", "\(method) b1")
            }
            for (method, body) in [
                (HTTPRequest.Method.get, nil), (.put, ["id": "b1", "text": "x"] as JSONValue), (.delete, nil),
            ] {
                let reply = try await client.send(
                    method, "/tables/Task/b1", json: body, headers: v3Alice, versioned: false)
                #expect(reply.status == .notFound, "v3 \(method) b1")
            }
            let taken = try await client.send(.post, "/tables/Task", json: ["id": "b1"], headers: alice)
            #expect(taken.status == .conflict && taken.json?["team"] == nil && taken.error != nil)
            let duplicate = try await client.send(.post, "/tables/Task", json: ["id": "r1"], headers: alice)
            #expect(duplicate.status == .conflict && duplicate.json?["id"] == "r1" && duplicate.json?["cost"] == nil)

            let page = try await client.send(.get, "/tables/Task?$inlinecount=allpages", headers: alice)
            #expect(page.ids == ["r1"] && page.json?["count"] == 1 && !page.text.contains("cost"))
            let v3Page = try await client.send(.get, "/tables/Task?$count=true", headers: v3Alice, versioned: false)
            #expect(v3Page.json?["count"] == 1 && !v3Page.text.contains("cost"))
            #expect(try await client.send(.get, "/tables/Task?$filter=team%20eq%20'blue'", headers: alice).ids == [])
            for query in ["$filter=cost%20gt%201", "$orderby=cost", "$select=cost,text"] {
                let reply = try await client.send(.get, "/tables/Task?\(query)", headers: alice)
                #expect(
                    reply.status == .badRequest && reply.error?.contains("unknown field 'cost'") == true, "\(query)")
            }
            let batch: JSONValue = ["requests": [["method": "PATCH", "url": "tables/Task/b1", "body": ["text": "x"]]]]
            let batched = try await client.send(.post, "/batch", json: batch, headers: alice)
            #expect(batched.json?["responses"]?.arrayValue?.first?["status"] == 404)

            let patched = try await client.send(
                .patch, "/tables/Task/r1", json: ["cost": 1, "text": "tile"], headers: alice)
            #expect(patched.status == .ok && patched.json?["text"] == "tile" && patched.json?["cost"] == nil)
            let stale = try await client.send(
                .patch, "/tables/Task/r1", json: ["version": "old", "text": "x"], headers: alice)
            #expect(stale.status == .conflict && stale.json?["text"] == "tile" && stale.json?["cost"] == nil)
            let replaced = try await client.send(
                .put, "/tables/Task/r1", json: ["id": "r1", "text": "grout", "team": "red"], headers: v3Alice,
                versioned: false)
            #expect(replaced.status == .ok && replaced.json?["cost"] == nil)

            // What root sees: the cost the hook set, untouched by alice's writes; bob's row as bob left it.
            let all = try await client.send(.get, "/tables/Task?$orderby=id", headers: root)
            #expect(all.items.map { $0["cost"] } == [5, 5] && all.items.map { $0["text"] } == [.null, "grout"])
            let console = try await client.send(.get, "/console/api/tables/Task", headers: alice, versioned: false)
            #expect(console.json?["count"] == 1 && !console.text.contains("cost"))
            let rootConsole = try await client.send(.get, "/console/api/tables/Task", headers: root, versioned: false)
            #expect(rootConsole.json?["count"] == 2 && rootConsole.text.contains("cost"))
        }
    }

    /// PostgreSQL: alice's PATCH waits behind a transaction that moves her row to bob's team; when that commits, her
    /// write is checked again on the row as it now is — a 404, and the row as the move left it. (A check made before
    /// the write statement would have let her change a row outside her view.)
    @Test(.enabled(if: TestDatabase.postgresURL != nil)) func aWriteBehindAMoveOutOfTheViewIsRefused() async throws {
        let alice = AuthTests.bearer(try await AuthTests.token("alice"))
        let root = AuthTests.bearer(try await AuthTests.token("root"))
        try await TestDatabase.with(.postgres) { database in
            guard case .postgres(let url) = database else { return }
            var configuration = Fixture.configuration(database, tables: [Fixture.table("Task")])
            configuration.auth = AuthTests.auth
            configuration.hooks = ["Task": Self.teamHooks]
            try await buildApplication(configuration).test(.router) { client in
                let inserted = try await client.send(
                    .post, "/tables/Task", json: ["id": "a", "text": "paint"], headers: alice)
                #expect(inserted.status == .created)
                // One statement that moves the row and holds its lock for 1.5 s before it commits.
                let move = Task {
                    try await DatabaseURL(parsing: url).execute(
                        #"WITH "moved" AS (UPDATE "task" SET "team" = 'blue' WHERE "id" = 'a' RETURNING 1) "#
                            + #"SELECT pg_sleep(1.5) FROM "moved""#)
                }
                try await Task.sleep(for: .milliseconds(500))
                let started = ContinuousClock.now
                let patched = try await client.send(.patch, "/tables/Task/a", json: ["text": "tile"], headers: alice)
                try await move.value
                #expect(patched.status == .notFound, "\(patched.text)")
                #expect(started.duration(to: .now) > .milliseconds(500), "the write waited for the move's lock")
                let row = try await client.send(.get, "/tables/Task/a", headers: root)
                #expect(row.json?["team"] == "blue" && row.json?["text"] == "paint")
            }
        }
    }

    /// A read hook's refusal answers every request to the table (reads, writes, `/changes`) with its status and
    /// message; a hook that fails is a 500 whose details stay in the log.
    @Test func theReadHookRefusesAndFailsSafely() async throws {
        let carol = AuthTests.bearer(try await AuthTests.token("carol"))
        let boom = AuthTests.bearer(try await AuthTests.token("boom"))
        try await Self.withTeams(.sqlite) { (client: any TestClientProtocol) async throws in
            for (method, path) in [
                (HTTPRequest.Method.get, "/tables/Task"), (.get, "/tables/Task/a"), (.post, "/tables/Task"),
                (.get, "/changes?tables=Task&wait=0"),
            ] {
                let reply = try await client.send(
                    method, path, json: method == .post ? ["id": "a"] : nil, headers: carol)
                #expect(reply.status == .forbidden && reply.error == "You are in no team", "\(method) \(path)")
            }
            let failed = try await client.send(.get, "/tables/Task", headers: boom)
            #expect(failed.status == .internalServerError && !failed.text.contains("fileNoSuchFile"))
        }
    }

    /// Every committed write of both dialects — insert, PATCH, DELETE, undelete, v3 PUT, v3 DELETE — reaches the
    /// after-commit hook with the item as it committed; refused and failed writes do not; a hook that throws gets the
    /// write again after the lease, and the outbox ends empty. On both stores.
    @Test(arguments: Backend.all) func theAfterCommitHookGetsEveryCommittedWrite(_ backend: Backend) async throws {
        let seen = Locked<[CommittedWrite]>([])
        let failuresLeft = Locked(2)
        let hooks = TableHooks(
            beforeInsert: { write in
                if write.fields["text"] == "forbidden" { throw RequestRefusal(.forbidden, "No") }
            },
            afterCommit: { write in
                if write.id == "flaky",
                    failuresLeft.withLock({
                        $0 -= 1; return $0 >= 0
                    })
                {
                    throw CocoaError(.fileWriteUnknown)
                }
                seen.withLock { $0.append(write) }
            })
        try await Fixture.withServer(
            backend, tables: [Fixture.table("TodoItem")], setup: .live,
            configure: {
                $0.hooks = ["TodoItem": hooks]
                $0.afterCommitLease = .milliseconds(300)
            }
        ) { (client: any TestClientProtocol) async throws in
            var versions: [String] = []
            func expectOK(_ reply: Reply, _ status: HTTPResponse.Status = .ok) {
                #expect(reply.status == status)
                if let version = reply.json?["version"]?.stringValue ?? reply.headers[.eTag] {
                    versions.append(version)
                }
            }
            expectOK(try await client.send(.post, "/tables/TodoItem", json: ["id": "a", "text": "milk"]), .created)
            expectOK(try await client.send(.patch, "/tables/TodoItem/a", json: ["text": "oat milk"]))
            expectOK(try await client.send(.delete, "/tables/TodoItem/a"))
            expectOK(try await client.send(.post, "/tables/TodoItem/a"))
            expectOK(
                try await client.send(
                    .put, "/tables/TodoItem/a", json: ["id": "a", "text": "tea"], headers: Self.v3, versioned: false))
            let v3Delete = try await client.send(.delete, "/tables/TodoItem/a", headers: Self.v3, versioned: false)
            #expect(v3Delete.status == .noContent)
            #expect(try await client.send(.post, "/tables/TodoItem", json: ["text": "forbidden"]).status == .forbidden)
            #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": "a"]).status == .conflict)
            expectOK(try await client.send(.post, "/tables/TodoItem", json: ["id": "flaky"]), .created)

            let deadline = ContinuousClock.now + .seconds(20)
            while seen.withLock({ $0.count }) < 7, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let writes = seen.withLock { $0 }
            #expect(writes.map(\.kind) == [.insert, .update, .delete, .undelete, .update, .delete, .insert])
            #expect(writes.map(\.id) == ["a", "a", "a", "a", "a", "a", "flaky"])
            #expect(writes[1].item["text"] == "oat milk" && writes[5].item.isDeleted)
            #expect(writes.prefix(5).map { $0.version?.rawValue } == versions.prefix(5).map { Optional($0) })
            #expect(Set(writes.map(\.sequence)).count == 7)
            #expect(writes.allSatisfy { $0.table.rawValue == "TodoItem" }, "the name as configured")
            #expect(failuresLeft.withLock { $0 } < 0, "the flaky write's hook threw twice, then ran")
        }
    }

    @Test func hooksForATableThatIsNotServedAreRefusedAtStartup() {
        var configuration = SyncServerConfiguration()
        configuration.hooks = ["Nope": TableHooks()]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }
}
