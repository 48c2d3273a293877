import Foundation
import OfflineSync
import OfflineSyncTesting
import Testing

/// A push stops at the first network failure, 401 or cancellation, and loses nothing.
@Suite(.timeLimit(.minutes(3))) struct PushStopTests {
    final class TokenLog: @unchecked Sendable {  // @unchecked: state behind `lock`.
        private let lock = NSLock()
        private var refreshes: [Bool] = []
        func record(_ refresh: Bool) { lock.withLock { refreshes.append(refresh) } }
        var calls: [Bool] { lock.withLock { refreshes } }
    }

    static func client(_ transport: ScriptedTransport, _ workspace: Workspace, tokens: TokenLog? = nil) async throws
        -> SyncClient
    {
        try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace) { configuration in
            configuration.transport = transport
            if let tokens {
                configuration.accountID = "alice"  // opaque tokens name no account
                configuration.tokenProvider = { refresh in
                    tokens.record(refresh)
                    return refresh ? "fresh-token" : "stale-token"
                }
            }
        }
    }

    @Test(.onEveryWire) func aCancelledRequestStopsThePushAndKeepsTheOperations() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.fail(.cancelled)])
        let client = try await Self.client(transport, workspace)
        try await client.syncTable("TodoItem", of: TodoItem.self).insert(contentsOf: [
            TodoItem(id: "a", text: "a", complete: false), TodoItem(id: "b", text: "b", complete: false),
        ])
        let error = await #expect(throws: PushError.self) { try await client.push() }
        guard case .cancelled? = error else {
            Issue.record("expected cancelled, got \(String(describing: error))"); return
        }
        #expect(transport.requests.count == 1)
        // What was sent stays frozen (its outcome is unknown): the first operation alone, or both in one batch.
        let sent = Wire.current.batchPush == .always ? [true, true] : [true, false]
        #expect(try await client.pendingOperations().map(\.isAttempted) == sent)
    }

    @Test(.onEveryWire) func a401AsksTheTokenProviderAgainThenStops() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.status(401, json: ["error": "expired"]), .status(401, json: nil)])
        let tokens = TokenLog()
        let client = try await Self.client(transport, workspace, tokens: tokens)
        try await client.syncTable("TodoItem", of: TodoItem.self).insert(TodoItem(id: "a", text: "a", complete: false))
        let error = await #expect(throws: PushError.self) { try await client.push() }
        guard case .unauthorized? = error else { Issue.record("expected unauthorized"); return }
        #expect(tokens.calls == [false, true])
        switch Wire.current.protocol {
        case .v2: #expect(transport.requests.map { $0.headers["X-ZUMO-AUTH"] } == ["stale-token", "fresh-token"])
        case .v3:
            #expect(
                transport.requests.map { $0.headers["Authorization"] } == ["Bearer stale-token", "Bearer fresh-token"])
        }
        #expect(try await client.pendingOperations().count == 1)
    }

    @Test(.onBothProtocols) func everyRequestCarriesTheProtocolHeaders() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.status(201, json: ["id": "a", "text": "a", "version": "v1"])])
        let client = try await Self.client(transport, workspace)
        try await client.syncTable("TodoItem", of: TodoItem.self).insert(TodoItem(id: "a", text: "a", complete: false))
        try await client.push()
        let headers = try #require(transport.requests.first?.headers)
        #expect(headers["ZUMO-API-VERSION"] == Wire.current.protocol.rawValue)
        #expect(headers["X-ZUMO-INSTALLATION-ID"] == (try await client.installationID()))
        #expect(headers["X-ZUMO-FEATURES"] == "OL")
        #expect(headers["Content-Type"] == "application/json")
        #expect(headers["User-Agent"]?.hasPrefix("OfflineSync/") == true)
        let body = try JSONValue(parsing: try #require(transport.requests.first?.body))
        #expect(body == ["id": "a", "text": "a", "complete": false])
        // The installation id survives a restart.
        let again = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        #expect(try await again.installationID() == (try await client.installationID()))
    }
}
