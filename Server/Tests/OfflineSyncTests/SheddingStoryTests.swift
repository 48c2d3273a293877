import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import SyncServer
import Testing

/// Devices under shedding (issue 67): six devices of one caller (no token: one address) add rows and sync at once
/// against a server whose fair shares are tight — one request running, two waiting for the caller, three in all. The
/// server answers many of their requests 429 (and 503 when its own queue is full); the SDK waits the `Retry-After`
/// and sends them again, and every device ends with every device's rows: nothing lost, nothing twice.
@Suite(.timeLimit(.minutes(3))) struct SheddingStoryTests {
    /// Counts the answers a busy server gives, and passes every request on.
    final class Counting: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind a lock.
        let refused = Locked(0)
        let inner = URLSessionTransport()

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            let response = try await inner.send(request)
            if response.status == 429 || response.status == 503 { refused.withLock { $0 += 1 } }
            return response
        }
    }

    @Test func devicesOfOneCallerUnderSheddingConvergeWithNothingLost() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { configuration in
            configuration.fairShares.perCaller = 1
            configuration.fairShares.perCallerQueue = 2
            configuration.fairShares.maxRunning = 1
            configuration.fairShares.maxQueued = 3
        } _: { url in
            let transport = Counting()
            var devices: [SyncClient] = []
            for index in 0..<6 {
                devices.append(
                    try await SyncClient.make(url, workspace: workspace, store: "device-\(index).sqlite") {
                        $0.transport = transport
                        $0.clock = ScaledClock(by: 1.0 / 50)  // a `Retry-After: 1` waits 20 ms
                        $0.retryLimit = 200
                    })
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, device) in devices.enumerated() {
                    group.addTask {
                        let table = try device.syncTable("TodoItem")
                        for round in 0..<3 {
                            for row in 0..<5 {
                                _ = try await table.insert([
                                    "id": .string("d\(index)-r\(round)-\(row)"), "text": "x", "complete": false,
                                ])
                            }
                            try await table.pull(queryID: "all")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let expected = Set(
                (0..<6).flatMap { index in
                    (0..<3).flatMap { round in (0..<5).map { "d\(index)-r\(round)-\($0)" } }
                })
            for device in devices {
                let table = try device.syncTable("TodoItem")
                try await table.pull(queryID: "all")
                let ids = try await table.items().compactMap { $0["id"]?.stringValue }
                #expect(ids.count == expected.count)
                #expect(Set(ids) == expected)
                #expect(try await device.pendingOperations().isEmpty)
            }
            #expect(transport.refused.withLock { $0 } > 0, "the server shed nothing: the story did not happen")
        }
    }
}
