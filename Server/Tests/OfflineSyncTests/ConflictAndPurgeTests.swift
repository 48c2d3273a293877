import Foundation
import OfflineSync
import OfflineSyncTesting
import Testing

@Suite(.onEveryWire, .timeLimit(.minutes(3))) struct ConflictTests {
    /// Device B edits an item that device A changed first: B's push gets a 412 with A's copy.
    static func makeConflict(
        _ url: URL, _ workspace: Workspace, configureB: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> (a: SyncClient, b: SyncClient) {
        let (a, b) = try await SyncClient.pair(url, workspace: workspace, configureB: configureB)
        try await a.syncTable("TodoItem", of: TodoItem.self).insert(
            TodoItem(id: "t", text: "original", complete: false))
        try await a.push()
        try await b.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
        var mineA = try #require(try await a.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t")))
        mineA.text = "from A"
        try await a.syncTable("TodoItem", of: TodoItem.self).update(mineA)
        try await a.push()
        var mineB = try #require(try await b.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t")))
        mineB.text = "from B"
        try await b.syncTable("TodoItem", of: TodoItem.self).update(mineB)
        return (a, b)
    }

    @Test func aConflictIsParkedWithBothVersionsAndDoesNotBlockOtherItems() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (_, b) = try await Self.makeConflict(url, workspace)
            try await b.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "other", text: "fine", complete: false))
            let error = await #expect(throws: PushError.self) { try await b.push() }
            guard case .operationsFailed(let result)? = error else { Issue.record("expected operationsFailed"); return }
            #expect(result.pushedCount == 1)
            let conflict = try #require(result.errors.first)
            #expect(conflict.status == 412)
            #expect(conflict.serverItem?["text"] == "from A")
            #expect(conflict.sentItem?["text"] == "from B")
            // Parked: the next push does not send it again, and the error is kept.
            #expect(try await b.push().pushedCount == 0)
            #expect(try await b.operationErrors().count == 1)
        }
    }

    @Test(arguments: ["takeServer", "discard", "keepMine"])
    func eachResolutionSettlesTheConflict(resolution: String) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.makeConflict(url, workspace)
            _ = try? await b.push()
            let error = try #require(try await b.operationErrors().first)
            let table = try b.syncTable("TodoItem", of: TodoItem.self)
            switch resolution {
            case "takeServer": try await b.resolve(error, with: .takeServerItem)
            case "discard": try await b.resolve(error, with: .discard)
            default: try await b.resolve(error, with: .keepMine(nil))
            }
            try await b.push()
            #expect(try await b.operationErrors().isEmpty)
            #expect(try await b.pendingOperations().isEmpty)
            let server = try await a.table("TodoItem", of: TodoItem.self).item(id: ItemID("t"))
            switch resolution {
            case "takeServer":
                #expect(try await table.item(id: ItemID("t"))?.text == "from A")
                #expect(server?.text == "from A")
            case "discard":  // the local row becomes the server's current row (PROTOCOL.md §7)
                #expect(try await table.item(id: ItemID("t"))?.text == "from A")
                #expect(server?.text == "from A")
            default:
                #expect(server?.text == "from B")
                #expect(try await table.item(id: ItemID("t"))?.version == server?.version)
            }
        }
    }

    @Test func aServerWinsHandlerResolvesDuringThePush() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (_, b) = try await Self.makeConflict(url, workspace) { $0.conflictHandler = .serverWins }
            let result = try await b.push()
            #expect(result.errors.isEmpty)
            #expect(try await b.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t"))?.text == "from A")
        }
    }

    @Test func aClientWinsHandlerPushesMineOverTheServer() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.makeConflict(url, workspace) { $0.conflictHandler = .clientWins }
            let result = try await b.push()
            #expect(result.pushedCount == 1)
            #expect(try await a.table("TodoItem", of: TodoItem.self).item(id: ItemID("t"))?.text == "from B")
        }
    }

    @Test func aLostInsertResponseIsRetriedInTheSamePushAndEndsWithOneServerRow() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.forwardThenFail(.timedOut)])
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.clock = ImmediateClock()
            }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "once", text: "x", complete: false))
            let result = try await client.push()  // the retry is answered 409 with the same fields: success
            #expect(result.pushedCount == 1)
            #expect(transport.requests.map(\.method) == ["POST", "POST"])
            #expect(try await client.pendingOperations().isEmpty)
            #expect(try await client.table("TodoItem", of: TodoItem.self).items().map(\.id) == ["once"])
        }
    }
}

@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct PurgeTests {
    @Test func purgeRefusesWithPendingOperationsUnlessForcedAndResetsCursors() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: (0..<5).map { TodoItem(id: "p\($0)", text: "\($0)", complete: false) })
            try await table.pull(queryID: "all")
            try await table.insert(TodoItem(id: "local", text: "unpushed", complete: false))
            let refused = await #expect(throws: PurgeError.self) { try await table.purge() }
            #expect(refused?.pendingCount == 1)
            #expect(try await table.count() == 6)
            try await table.purge(mode: .evenIfPending)
            #expect(try await table.count() == 0)
            #expect(try await client.pendingOperations().isEmpty)
            // The cursor was reset with the rows, so the next pull brings the server's rows back.
            let again = try await table.pull(queryID: "all")
            #expect(again.appliedCount == 5)
        }
    }

    @Test func aFilteredPurgeWithAQueryIDResetsOnlyThatCursor() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: (0..<4).map { TodoItem(id: "f\($0)", text: "\($0)", complete: $0 < 2) })
            try await table.pull(queryID: "all")
            try await table.purge(TableQuery().filter { $0.complete == true }, queryID: "all")
            #expect(try await table.count() == 2)
            #expect(try await table.pull(queryID: "all").appliedCount == 2)  // the purged two come back
            #expect(try await table.count() == 4)
        }
    }
}

@Suite(.onEveryWire, .timeLimit(.minutes(3))) struct MoreConflictTests {
    @Test func aDeleteOfAChangedItemConflictsAndCanBeRetriedOverTheServer() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await ConflictTests.makeConflict(url, workspace)
            _ = try? await b.push()  // B's update conflicts; settle it so that B can delete
            try await b.resolve(try #require(try await b.operationErrors().first), with: .takeServerItem)
            // A changes the item again; B deletes its (now stale) copy.
            var mineA = try #require(try await a.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t")))
            mineA.text = "A again"
            try await a.syncTable("TodoItem", of: TodoItem.self).update(mineA)
            try await a.push()
            try await b.syncTable("TodoItem", of: TodoItem.self).delete(id: ItemID("t"))
            let error = await #expect(throws: PushError.self) { try await b.push() }
            let conflict = try #require(error?.result.errors.first)
            #expect(conflict.operation.kind == .delete)
            #expect(conflict.status == 412)
            #expect(conflict.serverItem?["text"] == "A again")
            try await b.resolve(conflict, with: .keepMine(nil))
            try await b.push()
            #expect(try await a.table("TodoItem", of: TodoItem.self).item(id: ItemID("t")) == nil)
        }
    }

    @Test func anInsertOfATakenIDConflictsAndCanBecomeAnUpdate() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let a = try await SyncClient.make(url, workspace: workspace, store: "a.sqlite")
            let b = try await SyncClient.make(url, workspace: workspace, store: "b.sqlite") {
                $0.protocol = Wire.current.protocol(ofClient: 1)
            }
            try await a.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "same", text: "A's", complete: false))
            try await a.push()
            try await b.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "same", text: "B's", complete: true))
            let error = await #expect(throws: PushError.self) { try await b.push() }
            let conflict = try #require(error?.result.errors.first)
            #expect(conflict.operation.kind == .insert)
            #expect(conflict.status == 409)
            #expect(conflict.serverItem?["text"] == "A's")
            try await b.resolve(conflict, with: .changeKind(.update, nil))
            try await b.push()
            let server = try await a.table("TodoItem", of: TodoItem.self).item(id: ItemID("same"))
            #expect(server?.text == "B's")
            #expect(server?.complete == true)
        }
    }
}
