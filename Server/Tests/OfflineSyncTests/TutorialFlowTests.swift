import Foundation
import OfflineSync
import OfflineSyncTesting
import Testing

@Suite(.onEveryWire, .timeLimit(.minutes(3))) struct TutorialFlowTests {
    @Test func offlineAddsPersistAcrossARestartAndReachTheServerOnPush() async throws {
        let workspace = try Workspace()
        // Offline: the server is down.
        let offline = try await SyncClient.make(LiveServer.down, workspace: workspace)
        let todos = try offline.syncTable("TodoItem", of: TodoItem.self)
        for text in ["milk", "eggs", "bread"] {
            try await todos.insert(TodoItem(id: "", text: text, complete: false))
        }
        var eggs = try #require(try await todos.items(matching: TableQuery().filter { $0.text == "eggs" }).first)
        eggs.complete = true
        try await todos.update(eggs)
        await #expect(throws: PushError.self) { try await offline.push() }
        #expect(try await offline.pendingOperations().map(\.kind) == [.insert, .insert, .insert])

        try await LiveServer.run(in: workspace) { url in
            // "Restart": a new client on the same store, now online.
            let restarted = try await SyncClient.make(url, workspace: workspace)
            let table = try restarted.syncTable("TodoItem", of: TodoItem.self)
            #expect(try await table.count() == 3)
            #expect(try await restarted.table("TodoItem", of: TodoItem.self).items().isEmpty)
            let result = try await restarted.push()
            #expect(result.pushedCount == 3)
            #expect(try await restarted.pendingOperations().isEmpty)
            let server = try await restarted.table("TodoItem", of: TodoItem.self).items()
            #expect(Set(server.map(\.text)) == ["milk", "eggs", "bread"])
            #expect(server.first { $0.text == "eggs" }?.complete == true)
            // Local rows now carry the server's versions.
            #expect(try await table.items().allSatisfy { $0.version != nil && $0.updatedAt != nil })
        }
    }

    @Test func aSecondDeviceSeesTheChangesAfterPull() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let deviceA = try await SyncClient.make(url, workspace: workspace, store: "a.sqlite")
            let deviceB = try await SyncClient.make(url, workspace: workspace, store: "b.sqlite")
            try await deviceA.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "t1", text: "milk", complete: false))
            try await deviceA.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")  // implicit push
            let pulled = try await deviceB.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            #expect(pulled.appliedCount == 1)
            #expect(try await deviceB.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("t1"))?.text == "milk")
            // A delete on A reaches B as a tombstone.
            try await deviceA.syncTable("TodoItem", of: TodoItem.self).delete(id: ItemID("t1"))
            try await deviceA.push()
            try await deviceB.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            #expect(try await deviceB.syncTable("TodoItem", of: TodoItem.self).count() == 0)
        }
    }

    @Test func aNoChangeIncrementalPullMakesOneRequestAndReadsNothing() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        try await LiveServer.run(in: workspace) { url in
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport; $0.pullPageSize = 50
            }
            let todos = try client.syncTable("TodoItem", of: TodoItem.self)
            try await todos.insert(
                contentsOf: (0..<120).map { TodoItem(id: "t\($0)", text: "item \($0)", complete: false) })
            try await client.push()
            let first = try await todos.pull(queryID: "all")
            #expect(first.appliedCount == 0)  // the device's own pushed rows come back unchanged
            #expect(first.skippedCount == 0)
            let before = transport.requests.count
            let again = try await todos.pull(queryID: "all")
            #expect(again.appliedCount == 0)
            #expect(transport.requests.count - before == 1)
            let query = transport.requests.last?.url.query ?? ""
            switch Wire.current.protocol {
            case .v2:
                #expect(query.contains("__includeDeleted=true") && query.contains("updatedAt%20gt%20datetimeoffset"))
            case .v3:
                // The keyset filter of PROTOCOL.md §5 in OData v4: the cursor's date cast, not quoted.
                #expect(
                    query.contains("__includedeleted=true")
                        && query.contains("updatedAt%20gt%20cast(20") && query.contains(",Edm.DateTimeOffset)"))
            }
        }
    }
}
