import Foundation
import OfflineSync
import SyncSQLite
import SyncServer
import Testing

/// Automatic sync (issue 16, point 3) against a real server, with the real clock and short intervals: two
/// devices converge with no sync call, by the server's change notification or by the schedule. Its timing (the
/// backoff, offline, the network's return, a 401) is the root package's `AutoSyncClockTests`, on a manual clock.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct AutoSyncTests {
    static var options: AutoSyncOptions {
        var options = AutoSyncOptions()
        options.pushDelay = .milliseconds(50)
        options.pullInterval = .milliseconds(200)
        options.initialBackoff = .milliseconds(100)
        options.maximumBackoff = .milliseconds(400)
        return options
    }

    static func device(
        _ url: URL, _ workspace: Workspace, _ store: String, options: AutoSyncOptions = options,
        configure: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> (SyncClient, SyncTable<TodoItem>) {
        let client = try await SyncClient.make(url, workspace: workspace, store: store) {
            $0.clock = ContinuousClock()
            $0.retryLimit = 0
            configure(&$0)
        }
        let todos = try client.syncTable("TodoItem", of: TodoItem.self)
        await client.startSyncing(pulling: [todos.autoPull()], options: options)
        return (client, todos)
    }

    /// Answers 404 to `GET /changes`, as a backend without change notifications does.
    struct WithoutChanges: HTTPTransport {
        let inner = URLSessionTransport()
        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            if request.url.path.hasSuffix("/changes") {
                return HTTPResponseData(status: 404, headers: [:], body: Data())
            }
            return try await inner.send(request)
        }
    }

    /// With pulls scheduled a minute apart, the server's change notification alone brings another device's item
    /// (issue 16, point 4); against a backend without them the schedule does (the fallback).
    @Test(.timeLimit(.minutes(3)), arguments: [true, false])
    func aChangeArrivesByNotificationOrByTheSchedule(notified: Bool) async throws {
        let workspace = try Workspace()
        var options = Self.options
        if notified { options.pullInterval = .seconds(60) }
        try await LiveServer.run(in: workspace) { [options] url in
            let (a, aTodos) = try await Self.device(url, workspace, "a.sqlite", options: options)
            let (b, bTodos) = try await Self.device(url, workspace, "b.sqlite", options: options) {
                if !notified { $0.transport = WithoutChanges() }
            }
            let seenByB = ObservationTests.Collected(bTodos.observe())
            try await seenByB.last { $0.isEmpty }
            try await Task.sleep(for: .milliseconds(300))  // B's first pull and its follow request are under way
            let started = ContinuousClock.now
            try await aTodos.insert(TodoItem(id: "a", text: "milk", complete: false))
            // Notified: before B's next scheduled pull, a minute after its first.
            try await seenByB.last(within: .seconds(notified ? 45 : 60)) { ObservationTests.texts($0) == ["milk"] }
            print("AutoSyncTests: \(notified ? "notified" : "polled") in \(ContinuousClock.now - started)")
            await a.stopSyncing()
            await b.stopSyncing()
            await seenByB.cancel()
        }
    }

    /// Tables pulled together (`autoPull(together:)`, issue 49): a change to the second table alone reaches the other
    /// device by the server's notification of that table, with pulls scheduled a minute apart.
    @Test(.timeLimit(.minutes(3)))
    func tablesPulledTogetherFollowEveryTablesChanges() async throws {
        let workspace = try Workspace()
        var options = Self.options
        options.pullInterval = .seconds(60)
        let tables = [try TableConfiguration(name: "TodoItem"), try TableConfiguration(name: "Lines")]
        try await LiveServer.run(in: workspace, tables: tables) { [options] url in
            var devices: [(SyncClient, SyncTable<TodoItem>)] = []
            for store in ["a.sqlite", "b.sqlite"] {
                let client = try await SyncClient.make(url, workspace: workspace, store: store) {
                    $0.clock = ContinuousClock()
                    $0.retryLimit = 0
                }
                let (todos, lines) = (
                    try client.syncTable("TodoItem", of: TodoItem.self),
                    try client.syncTable("Lines", of: TodoItem.self)
                )
                await client.startSyncing(
                    pulling: [try client.autoPull(together: [try todos.pulling(), try lines.pulling()])],
                    options: options)
                devices.append((client, lines))
            }
            let ((a, aLines), (b, bLines)) = (devices[0], devices[1])
            let seenByB = ObservationTests.Collected(bLines.observe())
            try await seenByB.last { $0.isEmpty }
            try await Task.sleep(for: .milliseconds(300))  // B's first pull and its follow request are under way
            try await aLines.insert(TodoItem(id: "l", text: "a line", complete: false))
            try await seenByB.last(within: .seconds(45)) { ObservationTests.texts($0) == ["a line"] }
            await a.stopSyncing()
            await b.stopSyncing()
            await seenByB.cancel()
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func twoDevicesConvergeWithNoSyncCall() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, aTodos) = try await Self.device(url, workspace, "a.sqlite")
            let (b, bTodos) = try await Self.device(url, workspace, "b.sqlite")
            let seenByB = ObservationTests.Collected(bTodos.observe(TableQuery().orderBy(\.text)))
            let seenByA = ObservationTests.Collected(aTodos.observe(TableQuery().orderBy(\.text)))

            try await aTodos.insert(TodoItem(id: "a", text: "milk", complete: false))
            try await seenByB.last { ObservationTests.texts($0) == ["milk"] }
            try await bTodos.insert(TodoItem(id: "b", text: "bread", complete: false))
            try await bTodos.update(TodoItem(id: "a", text: "oat milk", complete: false))
            try await seenByA.last { ObservationTests.texts($0) == ["bread", "oat milk"] }
            #expect(try await a.pendingOperations().isEmpty)

            await a.stopSyncing()
            await b.stopSyncing()
            await seenByA.cancel()
            await seenByB.cancel()
        }
    }
}
