import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncSQL
import SyncServer
import Testing

/// Batched push (issue 17, docs/batch.md): when the client batches, that it falls back against a server
/// without the endpoint, and what a batch does with several operations of one item. The push cases themselves
/// (conflicts, refusals, lost replies, retries, 401) run on both paths (and on v3) in the suites marked `.onEveryWire`.
@Suite(.timeLimit(.minutes(3))) struct BatchPushTests {
    static func todo(_ id: String, _ text: String = "x") -> TodoItem { TodoItem(id: id, text: text, complete: false) }

    /// The paths of the requests a transport saw, in order.
    static func paths(_ transport: ScriptedTransport) -> [String] {
        transport.requests.map { $0.url.path.lowercased().split(separator: "/").prefix(2).joined(separator: "/") }
    }

    @Test func aNewClientSendsItsFirstOperationAloneThenBatchesOnceOffered() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.requestTimeout = .seconds(300)  // a loaded test machine took over 30 s for a batch of 500 once
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: (0..<750).map { Self.todo("i\($0)") })
            #expect(try await client.push().pushedCount == 750)
            // One insert alone (its reply offers batches of up to 500), then 500 and 249 in two batches.
            #expect(Self.paths(transport) == ["tables/todoitem", "batch", "batch"])
            #expect(try await client.pendingOperations().isEmpty)
            let other = try await SyncClient.make(url, workspace: workspace, store: "other.sqlite")
            #expect(try await other.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all").appliedCount == 750)
            // The versions the server gave are stored, so the next change of each item has its precondition.
            let local = try await table.items()
            #expect(local.count == 750 && local.allSatisfy { $0.version != nil })
        }
    }

    @Test(arguments: [SyncClient.BatchPush.whenOffered, .always])
    func aServerWithoutTheEndpointGetsOneRequestPerOperation(mode: SyncClient.BatchPush) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, offersBatch: false) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.batchPush = mode
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: (0..<5).map { Self.todo("i\($0)") })
            #expect(try await client.push().pushedCount == 5)
            try await table.insert(contentsOf: [Self.todo("j")])
            #expect(try await client.push().pushedCount == 1)
            // `.always` tries one batch, which the server refuses (404); then, as `.whenOffered`, one per operation.
            let batches = mode == .always ? ["batch"] : []
            #expect(Self.paths(transport) == batches + Array(repeating: "tables/todoitem", count: 6))
            #expect(try await client.operationErrors().isEmpty)
            #expect(try await client.table("TodoItem", of: TodoItem.self).items().count == 6)
        }
    }

    /// An item with an operation sent before (frozen: its reply was lost) and a newer one: the newer one needs the
    /// version the first one makes, so it goes in the next batch, and both reach the server in order.
    @Test func twoOperationsOfOneItemGoInOrderInSuccessiveBatches() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.forwardThenFail(.timedOut)])
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.batchPush = .always
                $0.retryLimit = 0
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: [Self.todo("a", "first"), Self.todo("b")])
            await #expect(throws: PushError.self) { try await client.push() }  // the batch's reply is lost
            var item = try #require(try await table.item(id: ItemID("a")))
            item.text = "second"
            try await table.update(item)
            try await table.insert(Self.todo("c"))
            #expect(try await client.pendingOperations().map(\.kind) == [.insert, .insert, .update, .insert])
            let result = try await client.push()
            #expect(result.pushedCount == 4)
            #expect(result.errors.isEmpty)
            // The first batch replays a's and b's inserts (409s with the same fields: successes); a's update,
            // with the version the insert got, and c's insert follow in a second.
            #expect(Self.paths(transport) == ["batch", "batch", "batch"])
            let server = try await client.table("TodoItem", of: TodoItem.self).items()
            #expect(Set(server.map(\.id)) == ["a", "b", "c"])
            #expect(server.first { $0.id == "a" }?.text == "second")
            #expect(try await table.item(id: ItemID("a"))?.version == server.first { $0.id == "a" }?.version)
        }
    }

    /// A conflict at the head of a batch parks that operation only; the operations after it, of other items, are
    /// applied.
    @Test func aConflictInABatchParksOnlyItsItem() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (_, b) = try await Wire.$current.withValue(.v2Batched) {
                try await ConflictTests.makeConflict(url, workspace)
            }
            let table = try b.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: [Self.todo("before"), Self.todo("after")])
            #expect(try await b.pendingOperations().map(\.kind) == [.update, .insert, .insert])
            let error = await #expect(throws: PushError.self) { try await b.push() }
            guard case .operationsFailed(let result)? = error else {
                Issue.record("\(String(describing: error))"); return
            }
            #expect(result.pushedCount == 2)
            #expect(result.errors.map(\.status) == [412])
            #expect(try await b.pendingOperations().count == 1)
            let server = try await b.table("TodoItem", of: TodoItem.self).items()
            #expect(Set(server.map(\.id)) == ["t", "before", "after"])
            #expect(server.first { $0.id == "t" }?.text == "from A")
        }
    }

    /// An operation the server refuses (400) in the middle of a batch is parked with the server's message; the
    /// others are applied, and the next push does not send it again.
    @Test func aRefusedOperationInABatchIsParkedWithTheServersMessage() async throws {
        let workspace = try Workspace()
        let typed = try TableConfiguration(name: "Typed", columns: ["n": .integer])
        try await LiveServer.run(in: workspace, tables: [typed]) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.batchPush = .always
            }
            let table = try client.syncTable("Typed", of: JSONValue.self)
            try await table.insert(contentsOf: [
                ["id": "one", "n": 1], ["id": "bad", "n": "two"], ["id": "three", "n": 3],
            ])
            let error = await #expect(throws: PushError.self) { try await client.push() }
            let refused = try #require(error?.result.errors.first)
            #expect(refused.status == 400 && !refused.isConflict)
            #expect(refused.operation.itemID.rawValue == "bad")
            #expect(refused.message?.isEmpty == false)
            #expect(error?.result.pushedCount == 2)
            #expect(Self.paths(transport) == ["batch"])
            #expect(try await client.push().pushedCount == 0)
            #expect(Self.paths(transport) == ["batch"])  // not sent again until resolved
        }
    }

    /// A reply the client cannot read as answers (cut short) is sent again, not taken as a refusal.
    @Test func aBatchReplyCutShortIsSentAgainAndEndsWithOneRowEach() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = CutFirstBatchReply(base: transport)
                $0.batchPush = .always
            }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(
                contentsOf: (0..<3).map { Self.todo("i\($0)") })
            #expect(try await client.push().pushedCount == 3)
            #expect(Self.paths(transport) == ["batch", "batch"])
            #expect(try await client.table("TodoItem", of: TodoItem.self).items().count == 3)
        }
    }
}

/// Cuts the body of the first batch reply to 10 bytes.
final class CutFirstBatchReply: HTTPTransport, @unchecked Sendable {  // @unchecked: `cut` behind `lock`.
    let base: any HTTPTransport
    private let lock = NSLock()
    private var cut = false

    init(base: any HTTPTransport) { self.base = base }

    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        var response = try await base.send(request)
        if request.url.path.hasSuffix("/batch"),
            lock.withLock({
                defer { cut = true }; return !cut
            })
        {
            response.body = response.body.prefix(10)
        }
        return response
    }
}
