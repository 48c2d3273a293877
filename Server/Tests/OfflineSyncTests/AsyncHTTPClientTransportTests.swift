import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OfflineSync
import OfflineSyncAsyncHTTPClient
import Testing

@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct AsyncHTTPClientTransportTests {
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
        #expect(transport.underlying != nil, "the library's own error is kept")
        #expect(try await client.pendingOperations().count == 1)
    }

    /// A field a response repeats (two `Link`s, two `Vary`s) was cut to its last value; both transports now hand
    /// over every value, joined as RFC 9110 allows.
    @Test func aRepeatedHeaderFieldKeepsEveryValue() async throws {
        let router = Router()
        router.get("repeated") { _, _ -> Response in
            var fields = HTTPFields()
            fields.append(HTTPField(name: .init("Link")!, value: "<http://a/1>; rel=next"))
            fields.append(HTTPField(name: .init("Link")!, value: "<http://a/2>; rel=last"))
            return Response(status: .ok, headers: fields)
        }
        try await Application(router: router).test(.live) { client in
            let url = try #require(URL(string: "http://127.0.0.1:\(client.port ?? 0)/repeated"))
            for transport in [AsyncHTTPClientTransport() as any HTTPTransport, URLSessionTransport()] {
                let response = try await transport.send(HTTPRequestData(method: "GET", url: url))
                #expect(response.header("Link") == "<http://a/1>; rel=next, <http://a/2>; rel=last", "\(transport)")
            }
        }
    }
}
