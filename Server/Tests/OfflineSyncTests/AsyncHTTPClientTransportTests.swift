import Foundation
import OfflineSync
import OfflineSyncAsyncHTTPClient
import Testing

@Suite(.onBothProtocols) struct AsyncHTTPClientTransportTests {
    @Test func syncsWithTheServerLikeTheDefaultTransport() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            try await PullTests.seed(url, workspace, count: 120)
            let client = try await SyncClient.make(url, workspace: workspace) { configuration in
                configuration.transport = AsyncHTTPClientTransport()
                configuration.pullPageSize = 50
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            #expect(try await table.pull(queryID: "all").appliedCount == 120)
            try await table.insert(TodoItem(id: "via-ahc", text: "x", complete: false))
            #expect(try await client.push().pushedCount == 1)
            #expect(try await client.table("TodoItem", of: TodoItem.self).item(id: ItemID("via-ahc"))?.text == "x")
            #expect(try await client.table("TodoItem", of: TodoItem.self).item(id: ItemID("missing")) == nil)
        }
    }

    @Test func anUnreachableServerIsATransportErrorAndNothingIsLost() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(LiveServer.down, workspace: workspace) {
            $0.transport = AsyncHTTPClientTransport()
            $0.requestTimeout = .seconds(2)  // AsyncHTTPClient retries a refused connection until the deadline
            $0.retryLimit = 0
        }
        try await client.syncTable("TodoItem", of: TodoItem.self).insert(TodoItem(id: "a", text: "a", complete: false))
        let error = await #expect(throws: PushError.self) { try await client.push() }
        guard case .serverUnavailable(let unavailable, _)? = error, case .noReply(let transport) = unavailable.reason
        else {
            Issue.record("expected serverUnavailable"); return
        }
        #expect(transport.code == .unreachable)
        #expect(try await client.pendingOperations().count == 1)
    }
}
