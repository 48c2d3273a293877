import Foundation
import OfflineSyncTesting
import Testing

@testable import OfflineSync

@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct RetryAndProgressTests {
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
