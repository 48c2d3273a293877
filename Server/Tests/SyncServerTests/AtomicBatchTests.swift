import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import SyncOData
import SyncServer
import Testing

/// Atomic batches (issue 49; docs/batch.md): `"atomic": true` applies every operation or none, on both stores — a
/// conflict, a missing row, a hook's refusal or an access rule of any member undoes the members before it; a later
/// member reads an earlier one's write; a column a member adds goes with an undone set; a replayed set says each
/// member was applied before; sets running beside each other and beside single writes all land; the offer says
/// `atomic`.
@Suite(.timeLimit(.minutes(3))) struct AtomicBatchTests {
    static func set(_ operations: [JSONValue]) -> JSONValue { ["atomic": true, "requests": .array(operations)] }

    static func statuses(_ reply: Reply) -> [Int64?] { BatchTests.answers(reply).map { $0["status"]?.intValue } }

    @Test(arguments: Backend.all) func aSetWhoseMembersAllSucceedIsApplied(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            let stored = try await client.send(.post, "/tables/TodoItem", json: ["id": "b", "text": "old"])
            _ = try await client.send(.post, "/tables/TodoItem", json: ["id": "c", "text": "gone soon"])
            #expect(stored["X-OfflineSync-Batch"]?.hasSuffix(", atomic") == true)
            let reply = try await client.send(
                .post, "/batch",
                json: Self.set([
                    BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a", "text": "new"]),
                    BatchTests.operation("PATCH", "tables/TodoItem/b", body: ["text": "new"], ifMatch: stored["ETag"]),
                    BatchTests.operation("DELETE", "tables/TodoItem/c"),
                    // A later member sees an earlier one's write.
                    BatchTests.operation("PATCH", "tables/TodoItem/a", body: ["text": "newer"]),
                ]))
            #expect(reply.status == .ok)
            #expect(reply.json?["applied"] == true)
            #expect(Self.statuses(reply) == [201, 200, 200, 200])
            #expect(try await client.send(.get, "/tables/TodoItem/a").json?["text"] == "newer")
            #expect(try await client.send(.get, "/tables/TodoItem/b").json?["text"] == "new")
            #expect(try await client.send(.get, "/tables/TodoItem/c").status == .notFound)
        }
    }

    @Test(arguments: Backend.all) func aFailedMemberUndoesTheWholeSet(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            let stored = try await client.send(.post, "/tables/TodoItem", json: ["id": "b", "text": "old"])
            let stale = try #require(stored["ETag"])
            let changed = try await client.send(.patch, "/tables/TodoItem/b", json: ["text": "theirs"])
            _ = try await client.send(.post, "/tables/TodoItem", json: ["id": "c", "text": "kept"])
            let failures: [(JSONValue, Int64)] = [
                (BatchTests.operation("PATCH", "tables/TodoItem/b", body: ["text": "mine"], ifMatch: stale), 412),
                (BatchTests.operation("PATCH", "tables/TodoItem/missing", body: ["text": "x"]), 404),
                (BatchTests.operation("POST", "tables/TodoItem", body: ["id": "b", "text": "again"]), 409),
                (BatchTests.operation("DELETE", "tables/Unknown/x"), 404),
            ]
            for (failing, status) in failures {
                let reply = try await client.send(
                    .post, "/batch",
                    json: Self.set([
                        BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a", "text": "new"]),
                        BatchTests.operation("DELETE", "tables/TodoItem/c"),
                        failing,
                        BatchTests.operation("POST", "tables/TodoItem", body: ["id": "z", "text": "after"]),
                    ]))
                #expect(reply.status == .ok)
                #expect(reply.json?["applied"] == false)
                #expect(Self.statuses(reply) == [424, 424, status, 424], "\(failing)")
                #expect(
                    BatchTests.answers(reply)[3]["body"]?["error"]
                        == "Not applied: operation 3 of the atomic batch failed")
                let answers = BatchTests.answers(reply)
                #expect(answers[0]["body"]?["error"]?.stringValue?.contains("operation 3 of the atomic batch") == true)
                // Nothing of the set is stored: not the insert before the failure, not the delete.
                #expect(try await client.send(.get, "/tables/TodoItem/a").status == .notFound)
                #expect(try await client.send(.get, "/tables/TodoItem/z").status == .notFound)
                #expect(try await client.send(.get, "/tables/TodoItem/c").json?["text"] == "kept")
                let kept = try await client.send(.get, "/tables/TodoItem/b")
                #expect(kept.json?["text"] == "theirs" && kept["ETag"] == changed["ETag"])
            }
            // The conflict's answer carries the server's row, as alone.
            let reply = try await client.send(
                .post, "/batch",
                json: Self.set([
                    BatchTests.operation("PATCH", "tables/TodoItem/b", body: ["text": "mine"], ifMatch: stale)
                ]))
            #expect(BatchTests.answers(reply).first?["body"]?["text"] == "theirs")
        }
    }

    @Test(arguments: Backend.all) func aReplayedSetAnswersEachMemberAsAppliedBefore(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            let stored = try await client.send(.post, "/tables/TodoItem", json: ["id": "b", "text": "old"])
            let set = Self.set([
                BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a", "text": "new"]),
                BatchTests.operation("PATCH", "tables/TodoItem/b", body: ["text": "new"], ifMatch: stored["ETag"]),
            ])
            let first = try await client.send(.post, "/batch", json: set)
            #expect(Self.statuses(first) == [201, 200])
            // The reply was lost: the same set again. Each member says what it met — the rows it made.
            let replay = try await client.send(.post, "/batch", json: set)
            #expect(replay.json?["applied"] == false)
            #expect(Self.statuses(replay) == [409, 412])
            let answers = BatchTests.answers(replay)
            #expect(answers[0]["body"] == BatchTests.answers(first)[0]["body"])
            #expect(answers[1]["body"] == BatchTests.answers(first)[1]["body"])
        }
    }

    @Test(arguments: Backend.all) func aHooksRefusalOfAnyMemberUndoesTheSet(_ backend: Backend) async throws {
        try await TableHookTests.withServer(backend) { client in
            let reply = try await client.send(
                .post, "/batch",
                json: Self.set([
                    BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a", "text": "milk"]),
                    BatchTests.operation("POST", "tables/TodoItem", body: ["id": "b", "text": "forbidden"]),
                ]))
            #expect(Self.statuses(reply) == [424, 403])
            #expect(try await client.send(.get, "/tables/TodoItem/a").status == .notFound)
            // A hook that throws (500) undoes the set too.
            let failed = try await client.send(
                .post, "/batch",
                json: Self.set([
                    BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a", "text": "milk"]),
                    BatchTests.operation("POST", "tables/TodoItem", body: ["id": "c", "text": "boom"]),
                ]))
            #expect(Self.statuses(failed) == [424, 500])
            #expect(try await client.send(.get, "/tables/TodoItem/a").status == .notFound)
            // The hooks ran for the members of a set that was applied.
            let applied = try await client.send(
                .post, "/batch",
                json: Self.set([BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a", "text": "milk"])]))
            #expect(BatchTests.answers(applied).first?["body"]?["text"] == "MILK")
        }
    }

    /// Store level (HummingbirdTesting's client sends one request at a time on one connection): four sets and four
    /// single writes at once, and a set that throws — each set whole, the single writes between them, the thrown one
    /// undone; nothing waits forever for the writer (SQLite) or a lock (PostgreSQL). A single write waits for the sets
    /// before it to commit (each holds the table's stamp until then): in a whole-suite run on two cores, one waited
    /// past the server's 10 s query timeout (a 503 a client retries), so here the bound is 2 minutes.
    @Test(arguments: Backend.all) func setsBesideEachOtherAndBesideSingleWritesAllLand(_ backend: Backend) async throws
    {
        struct Undo: Error {}
        try await TestDatabase.with(backend) { database in
            let configuration = Fixture.configuration(database, tables: [Fixture.table("TodoItem")])
            try await Fixture.withTableStore(configuration, queryTimeout: .seconds(120)) { store in
                let table = try TableName("TodoItem")
                let insert = { @Sendable (id: String, store: any TableStore) in
                    _ = try await store.insert(["text": "x"], id: try ItemID(id), into: table, scope: .everything)
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for set in 0..<4 {
                        group.addTask {
                            try await store.atomically { transaction in
                                for member in 0..<5 { try await insert("s\(set)-\(member)", transaction) }
                            }
                        }
                        group.addTask { try await insert("one-\(set)", store) }
                    }
                    group.addTask {
                        await #expect(throws: Undo.self) {
                            try await store.atomically { transaction in
                                try await insert("undone", transaction)
                                throw Undo()
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let page = try await store.query(table, ODataQuery(), scope: .everything, limit: 100, maxBytes: .max)
                #expect(page.itemCount == 24)
                #expect(
                    try await store.item(ItemID("undone"), in: table, scope: .everything, includeDeleted: true) == nil)
            }
        }
    }

    @Test func atomicMustBeABoolean() async throws {
        try await Fixture.withServer(.sqlite) { client in
            let reply = try await client.send(
                .post, "/batch",
                json: [
                    "atomic": "yes", "requests": [BatchTests.operation("POST", "tables/TodoItem", body: ["id": "a"])],
                ])
            #expect(reply.status == .badRequest && reply.error?.contains("\"atomic\"") == true)
            #expect(try await client.send(.get, "/tables/TodoItem/a").status == .notFound)
        }
    }
}
