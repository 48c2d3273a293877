import Foundation
import OfflineSyncTesting
import Testing

@testable import OfflineSync

/// A push or a pull that meets no server (a scripted transport, a closed port) or a local query it cannot run:
/// what it throws, what it retries on the injected clock, and that nothing queued is lost. Moved from the server
/// package (they need no server).
@Suite(.timeLimit(.minutes(3))) struct UnreachableServerTests {
    static let unreachable = URL(string: "http://127.0.0.1:9")!
    static func todo(_ id: String, _ text: String) -> TodoItem { TodoItem(id: id, text: text, complete: false) }

    /// A 503 was once stored as an operation error (then "resolved" by deleting the item).
    @Test(.onEveryWire) func aServerErrorIsRetriedWithBackoffThenReportedUnavailableWithNothingRecorded()
        async throws
    {
        let workspace = try Workspace()
        let transport = ScriptedTransport([
            .status(503, json: ["error": "down"]), .status(503, json: nil), .status(503, json: nil),
        ])
        let clock = ImmediateClock()
        let client = try await SyncClient.make(Self.unreachable, workspace: workspace) {
            $0.transport = transport
            $0.clock = clock
            $0.jitter = { 1.0 }
            $0.retryLimit = 2
        }
        try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.todo("a", "a"))
        let error = await #expect(throws: PushError.self) { try await client.push() }
        guard case .serverUnavailable(let unavailable, let result)? = error else {
            Issue.record("expected serverUnavailable, got \(String(describing: error))"); return
        }
        #expect(unavailable.reason == .status(503))
        #expect(unavailable.attempts == 3)
        #expect(result.pushedCount == 0)
        #expect(clock.sleeps == [.milliseconds(500), .seconds(1)])
        #expect(try await client.operationErrors().isEmpty)
        #expect(try await client.pendingOperations().count == 1)
        #expect(String(describing: error!).hasPrefix("Server unavailable (HTTP 503) after 3 attempts"))
    }

    @Test(.onBothProtocols) func aPullGivesUpAfterTheRetryLimit() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.fail(.unreachable), .fail(.unreachable)])
        let client = try await SyncClient.make(Self.unreachable, workspace: workspace) { configuration in
            configuration.transport = transport
            configuration.retryLimit = 1
            configuration.clock = ManualClock()
        }
        let clock = try #require(client.configuration.clock as? ManualClock)
        async let pulled: Result<PullSummary, any Error> = {
            do { return .success(try await client.syncTable("TodoItem", of: TodoItem.self).pull()) } catch {
                return .failure(error)
            }
        }()
        clock.advance(to: await clock.nextSleep())
        let outcome = await pulled
        #expect(throws: PullError.self) { try outcome.get() }
        #expect(transport.requests.count == 2)
    }

    @Test func aQueryWithAnUnknownFieldEndsTheSequenceWithItsError() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(Self.unreachable, workspace: workspace)
        let todos = try client.syncTable("TodoItem", of: TodoItem.self)
        let bad = todos.observe(TableQuery().orderBy(\.text.count))
        await #expect(throws: ValueError.self) {
            for try await _ in bad {}
        }
    }
}
