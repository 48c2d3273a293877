import Foundation
import OfflineSyncTesting
import Testing

@testable import OfflineSync

@Suite(.onBothProtocols) struct RetryAndProgressTests {
    @Test func aPullRetriesATransientFailureAfterTheBackoff() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let clock = ManualClock()
            let transport = ScriptedTransport(
                forwardingTo: URLSessionTransport(), [.status(503, json: ["error": "busy"]), .fail(.timedOut)])
            let client = try await SyncClient.make(url, workspace: workspace) { configuration in
                configuration.transport = transport
                configuration.clock = clock
                configuration.jitter = { 1.0 }
            }
            async let pulled = try client.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            let first = await clock.nextSleep()
            #expect(first.offset == .milliseconds(500))
            clock.advance(to: first)
            let second = await clock.nextSleep()
            #expect(second.offset == .milliseconds(1500))
            clock.advance(to: second)
            let summary = try await pulled
            #expect(summary.appliedCount == 0)
            #expect(transport.requests.count == 3)
        }
    }

    @Test func aPullGivesUpAfterTheRetryLimit() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.fail(.unreachable), .fail(.unreachable)])
        let client = try await SyncClient.make(LiveServer.down, workspace: workspace) { configuration in
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

    @Test func progressStreamsOneElementPerPageWithTheTotal() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            try await PullTests.seed(url, workspace, count: 120)
            let client = try await SyncClient.make(url, workspace: workspace) { $0.pullPageSize = 50 }
            var seen: [PullProgress] = []
            for try await progress in try client.syncTable("TodoItem", of: TodoItem.self).pullProgress(queryID: "all") {
                seen.append(progress)
            }
            #expect(seen.map(\.appliedCount) == [50, 100, 120])
            #expect(seen.allSatisfy { $0.totalCount == 120 })
        }
    }
}
