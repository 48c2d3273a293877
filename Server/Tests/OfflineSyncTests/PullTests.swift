import Foundation
import GRDB
import OfflineSync
import OfflineSyncTesting
import Testing

@Suite struct PullTests {
    /// Seeds the server with `count` rows through a client's push.
    static func seed(_ url: URL, _ workspace: Workspace, count: Int) async throws {
        let seeder = try await SyncClient.make(url, workspace: workspace, store: "seeder.sqlite")
        try await seeder.syncTable("TodoItem", of: TodoItem.self)
            .insert(
                contentsOf: (0..<count).map {
                    TodoItem(id: String(format: "r%04d", $0), text: "row \($0)", complete: false)
                })
        try await seeder.push()
    }

    /// Issue 14, point 9, on the client: a pulled row is skipped only when its own id has a pending operation,
    /// compared as bytes. Before, the set of pending ids held Swift strings, so a refused operation on `café`
    /// written decomposed (NFD) kept the server's precomposed (NFC) `café`, another row, from ever arriving.
    @Test func aPendingIDSkipsOnlyItsOwnRowNotAnotherNormalization() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let other = try await SyncClient.make(url, workspace: workspace, store: "other.sqlite")
            try await other.syncTable("TodoItem", of: TodoItem.self)
                .insert(TodoItem(id: "caf\u{E9}", text: "composed", complete: false))
            try await other.push()
            let client = try await SyncClient.make(url, workspace: workspace)
            let untyped = try client.syncTable("TodoItem")
            // Refused by the server (complete holds true or false), so it stays pending.
            _ = try await untyped.insert(["id": "cafe\u{301}", "text": "decomposed", "complete": "yes"])
            let summary = try await untyped.pull(queryID: "all")
            #expect(summary.pushErrors.count == 1)
            #expect(try await untyped.item(id: ItemID("caf\u{E9}"))?["text"] == "composed")
            #expect(try await untyped.item(id: ItemID("cafe\u{301}"))?["text"] == "decomposed")
        }
    }

    @Test func rowsSharingOneUpdatedAtArePulledOnceEachAcrossPages() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        try await LiveServer.run(in: workspace) { url in
            try await Self.seed(url, workspace, count: 300)
            // Give every row the same updatedAt, as a server with coarse timestamps would.
            let server = try DatabaseQueue(path: workspace.path("server.sqlite"))
            try await server.write { db in try db.execute(sql: "UPDATE todoitem SET updatedAt = 1700000000000") }
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport; $0.pullPageSize = 50
            }
            let summary = try await client.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            #expect(summary.appliedCount == 300)
            #expect(transport.requests.count == 7)  // 6 full pages, then an empty one
            #expect(try await client.syncTable("TodoItem", of: TodoItem.self).count() == 300)
        }
    }

    @Test func aPullInterruptedBetweenPagesResumesWithoutRedownloading() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            try await Self.seed(url, workspace, count: 250)
            let transport = ScriptedTransport(
                forwardingTo: URLSessionTransport(), [.forward, .forward, .fail(.unreachable)])
            let client = try await SyncClient.make(url, workspace: workspace) { configuration in
                configuration.transport = transport
                configuration.pullPageSize = 50
                configuration.retryLimit = 0  // fail at once, as a crash between pages would
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            await #expect(throws: PullError.self) { try await table.pull(queryID: "all") }
            let kept = try await table.count()
            #expect(kept >= 50)  // every page applied before the failure is kept with its cursor
            let resumed = try await table.pull(queryID: "all")
            #expect(resumed.appliedCount == 250 - kept)
            #expect(try await table.count() == 250)
        }
    }

    @Test func aPullWhoseImplicitPushMeetsAConflictGoesOnAndKeepsTheLocalEdit() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            try await Self.seed(url, workspace, count: 3)
            let client = try await SyncClient.make(url, workspace: workspace)
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.pull(queryID: "all")
            var row = try #require(try await table.item(id: ItemID("r0001")))
            row.text = "my offline edit"
            try await table.update(row)
            // Another device changes the same row on the server first.
            let other = try await SyncClient.make(url, workspace: workspace, store: "other.sqlite")
            var theirs = try #require(try await other.table("TodoItem", of: TodoItem.self).item(id: ItemID("r0001")))
            theirs.text = "their edit"
            try await other.table("TodoItem", of: TodoItem.self).update(theirs)
            let summary = try await table.pull(queryID: "all")
            #expect(summary.pushErrors.map(\.status) == [412])
            #expect(summary.skippedCount == 1)  // the conflicted row waits for its resolution
            #expect(try await table.item(id: ItemID("r0001"))?.text == "my offline edit")
        }
    }
}

@Suite struct LastSyncDateTests {
    @Test func aFinishedPullRecordsItsDateAndAFailedOneDoesNot() async throws {
        let workspace = try Workspace()
        let first = Date(timeIntervalSince1970: 1_800_000_000.123)
        try await LiveServer.run(in: workspace) { url in
            let client = try await SyncClient.make(url, workspace: workspace) { $0.now = { first } }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            #expect(try await table.lastSyncDate() == nil)
            try await table.pull(queryID: "all")
            #expect(try await table.lastSyncDate() == first)
        }
        let offline = try await SyncClient.make(LiveServer.down, workspace: workspace) {
            $0.now = { first.addingTimeInterval(60) }
        }
        await #expect(throws: PullError.self) { try await offline.syncTable("TodoItem", of: TodoItem.self).pull() }
        #expect(try await offline.syncTable("TodoItem", of: TodoItem.self).lastSyncDate() == first)
    }
}

@Suite struct ServerPageTests {
    @Test func theClientFollowsAServersSmallerPage() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        try await LiveServer.run(in: workspace) { url in  // the server's TodoItem pages hold 50 rows
            try await PullTests.seed(url, workspace, count: 120)
            // The client asks for 1000 rows a page.
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            let summary = try await client.syncTable("TodoItem", of: TodoItem.self).pull(queryID: "all")
            #expect(summary.appliedCount == 120)
            #expect(transport.requests.count == 3)  // 50 + Link, 50 + Link, 20 without a Link
        }
    }
}
