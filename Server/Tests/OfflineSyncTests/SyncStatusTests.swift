import Foundation
import OfflineSync
import SyncSQLite
import SyncServer
import Testing

/// The sync status (issue 16, point 2) against a real server: counts follow local writes and pushes,
/// `isPushing`/`pullingTables` show running work, and an outage is `unavailable` until a sync gets through.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct SyncStatusTests {
    /// The real transport with 30 ms of latency (so that running work shows in the status), or "no network"
    /// while `isDown` is set.
    struct Outage: HTTPTransport {
        let isDown = Locked(false)
        let inner = URLSessionTransport()

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            try await Task.sleep(for: .milliseconds(30))
            if isDown.withLock({ $0 }) { throw TransportError(.unreachable, host: request.url.host ?? "") }
            return try await inner.send(request)
        }
    }

    @Test func theStatusFollowsChangesAnOutageAndTheRecovery() async throws {
        let workspace = try Workspace()
        let outage = Outage()
        try await LiveServer.run(in: workspace) { url in
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = outage }
            let todos = try client.syncTable("TodoItem", of: TodoItem.self)
            let statuses = ObservationTests.Collected(client.status())

            try await statuses.last { $0.pendingCount == 0 && !$0.isSyncing && $0.lastSyncedAt == nil }
            try await todos.insert(TodoItem(id: "a", text: "milk", complete: false))
            try await todos.insert(TodoItem(id: "b", text: "eggs", complete: false))
            try await statuses.last { $0.pendingCount == 2 }

            outage.isDown.withLock { $0 = true }
            await #expect(throws: PushError.self) { try await client.push() }
            let down = try await statuses.last { $0.lastError != nil && !$0.isPushing }
            guard case .unavailable? = down.lastError else {
                Issue.record("expected unavailable, got \(String(describing: down.lastError))")
                return
            }
            #expect(down.pendingCount == 2 && down.lastSyncedAt == nil)
            #expect(await statuses.values.contains { $0.isPushing }, "the push showed while it ran")

            outage.isDown.withLock { $0 = false }
            try await client.push()
            let recovered = try await statuses.last { $0.lastError == nil && $0.pendingCount == 0 && !$0.isSyncing }
            #expect(recovered.lastSyncedAt != nil)

            try await todos.pull(queryID: "all")
            #expect(await statuses.values.contains { $0.pullingTables.contains(todos.name) })
            try await statuses.last { $0.pullingTables.isEmpty && $0.downloadProgress.isEmpty }
            await statuses.cancel()
            try await statuses.waitUntilFinished()
        }
    }

    @Test func conflictsAndRefusalsAreCountedApart() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let mine = try await SyncClient.make(url, workspace: workspace)
            let theirs = try await SyncClient.make(url, workspace: workspace, store: "theirs.sqlite")
            let myTodos = try mine.syncTable("TodoItem", of: TodoItem.self)
            let theirTodos = try theirs.syncTable("TodoItem", of: TodoItem.self)
            try await myTodos.insert(TodoItem(id: "a", text: "milk", complete: false))
            try await mine.push()
            try await theirTodos.pull()
            try await theirTodos.update(TodoItem(id: "a", text: "oat milk", complete: false))
            try await theirs.push()
            try await myTodos.update(TodoItem(id: "a", text: "almond milk", complete: false))
            let statuses = ObservationTests.Collected(mine.status())
            await #expect(throws: PushError.self) { try await mine.push() }
            let conflicted = try await statuses.last { $0.conflictCount == 1 }
            #expect(conflicted.refusedCount == 0 && conflicted.pendingCount == 1 && conflicted.lastError == nil)
            await statuses.cancel()
        }
    }
}
