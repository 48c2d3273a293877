import Foundation
import OfflineSync
import OfflineSyncTesting
import Testing

/// What happens to an item around a parked conflict (issue 12, points 2 and 3; PROTOCOL.md §5,
/// §7 and §8): every resolution but "leave" ends with the device holding the server's current row
/// or a re-sent change, and a refused change blocks neither other pushes nor pulls.
@Suite(.timeLimit(.minutes(3))) struct ConflictFlowTests {
    /// B's update conflicts; while it is parked, A changes the item again and B pulls past it.
    static func conflictThenNewerServerVersion(_ url: URL, _ workspace: Workspace) async throws
        -> (a: SyncClient, b: SyncClient)
    {
        let (a, b) = try await ConflictTests.makeConflict(url, workspace)
        _ = try? await b.push()
        var item = try #require(try await a.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t")))
        item.text = "A again"
        try await a.syncTable("TodoItem", of: TodoItem.self).update(item)
        try await a.push()
        let pulled = try await b.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
        #expect(pulled.skippedCount == 1)
        return (a, b)
    }

    /// Point 2: the device kept the copy stored with the error ("from A"), or after a discard lost
    /// the item for good, and later pulls said "received 0".
    @Test(.onEveryWire, arguments: ["takeServer", "discard"])
    func resolvingWithTheServersItemFetchesItsCurrentRow(resolution: String) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (_, b) = try await Self.conflictThenNewerServerVersion(url, workspace)
            let error = try #require(try await b.operationErrors().first)
            #expect(error.serverItem?["text"] == "from A")
            try await b.resolve(error, with: resolution == "discard" ? .discard : .takeServerItem)
            let table = try b.syncTable("TodoItem", of: TodoItem.self)
            #expect(try await table.item(id: ItemID("t"))?.text == "A again")
            #expect(try await b.pendingOperations().isEmpty)
            #expect(try await table.pull(queryID: "all").appliedCount == 0)
        }
    }

    @Test(.onEveryWire) func aResolutionMadeOfflineFetchesTheCurrentRowOnTheNextPull() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (_, online) = try await Self.conflictThenNewerServerVersion(url, workspace)
            let error = try #require(try await online.operationErrors().first)
            // The same store, opened while the server cannot be reached.
            let offline = try await SyncClient.make(LiveServer.down, workspace: workspace, store: "b.sqlite")
            try await offline.resolve(error, with: .takeServerItem)
            let table = try offline.syncTable("TodoItem", of: TodoItem.self)
            #expect(try await table.item(id: ItemID("t"))?.text == "from A")  // the copy it had
            // Back online: the next pull fetches the item's current row.
            let reopened = try await SyncClient.make(url, workspace: workspace, store: "b.sqlite")
            let pulled = try await reopened.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            #expect(pulled.appliedCount == 0)
            #expect(
                try await reopened.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t"))?.text == "A again")
        }
    }

    /// A → inserts t and u; B pulls them; A deletes t; B edits t offline.
    static func editOfDeletedItem(_ url: URL, _ workspace: Workspace) async throws -> (a: SyncClient, b: SyncClient) {
        let a = try await SyncClient.make(url, workspace: workspace, store: "a.sqlite")
        let b = try await SyncClient.make(url, workspace: workspace, store: "b.sqlite") {
            $0.protocol = Wire.current.protocol(ofClient: 1)
        }
        let tableA = try a.syncTable("TodoItem", of: TodoItem.self)
        try await tableA.insert(contentsOf: [TodoItem(id: "t", text: "t", complete: false)])
        try await a.push()
        try await b.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
        try await tableA.delete(id: ItemID("t"))
        try await tableA.insert(TodoItem(id: "later", text: "added after", complete: false))
        try await a.push()
        var mine = try #require(try await b.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t")))
        mine.text = "B's edit"
        try await b.syncTable("TodoItem", of: TodoItem.self).update(mine)
        return (a, b)
    }

    /// Point 3: a 404 on the update was a refusal retried forever, and the failed implicit push
    /// kept the device from ever pulling again.
    @Test(.onEveryWire) func anUpdateOfAnItemDeletedElsewhereIsAConflictAndPullsGoOn() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (_, b) = try await Self.editOfDeletedItem(url, workspace)
            let table = try b.syncTable("TodoItem", of: TodoItem.self)
            let summary = try await table.pull(queryID: "all")
            let conflict = try #require(summary.pushErrors.first)
            // v3 tells a tombstone apart.
            #expect(conflict.status == (Wire.current.protocol(ofClient: 1) == .v2 ? 404 : 410))
            #expect(conflict.isConflict)
            #expect(conflict.serverItem?.isDeleted == true)  // the tombstone, fetched by id
            #expect(try await table.item(id: ItemID("later"))?.text == "added after")  // the pull went on
            #expect(try await table.item(id: ItemID("t"))?.text == "B's edit")  // kept until resolved
            // Parked: the next push sends nothing.
            #expect(try await b.push().pushedCount == 0)
            try await b.resolve(conflict, with: .takeServerItem)
            #expect(try await table.item(id: ItemID("t")) == nil)
            #expect(try await b.pendingOperations().isEmpty)
        }
    }

    @Test(.onEveryWire) func keepingMineOverADeletedItemBringsItBack() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.editOfDeletedItem(url, workspace)
            _ = try? await b.push()
            let conflict = try #require(try await b.operationErrors().first)
            try await b.resolve(conflict, with: .keepMine(nil))
            #expect(try await b.push().pushedCount == 1)
            let server = try #require(try await a.table("TodoItem", of: TodoItem.self).item(id: ItemID("t")))
            #expect(server.text == "B's edit")
            #expect(
                try await b.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t"))?.version == server.version)
            try await a.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            #expect(try await a.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t"))?.text == "B's edit")
        }
    }

    /// A definitive refusal is parked with the server's message, not sent again by every push, and
    /// does not keep the other items from being pushed.
    @Test func aRefusedChangeIsParkedWithTheServersMessage() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(
                forwardingTo: URLSessionTransport(), [.status(400, json: ["error": "The field 'text' is too long."])])
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(contentsOf: [
                TodoItem(id: "bad", text: "x", complete: false), TodoItem(id: "good", text: "y", complete: false),
            ])
            let error = await #expect(throws: PushError.self) { try await client.push() }
            let refused = try #require(error?.result.errors.first)
            #expect(refused.status == 400 && !refused.isConflict)
            #expect(refused.message == "The field 'text' is too long.")
            #expect(error?.result.pushedCount == 1)
            let requests = transport.requests.count
            #expect(try await client.push().pushedCount == 0)
            #expect(transport.requests.count == requests)  // not sent again until resolved
            try await client.resolve(refused, with: .discard)  // the server has none: the row goes
            #expect(try await table.item(id: ItemID("bad")) == nil)
            #expect(try await client.operationErrors().isEmpty)
        }
    }
}
