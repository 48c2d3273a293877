import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import SyncServer
import TestSupport
import Testing

/// Tombstones that expire (issue 66), as devices see them, against a real server in both dialects: a device offline
/// past the server's removal of tombstones drops the rows deleted meanwhile on its next pull — keeping its pending
/// insert (pushed) and its pending edit of a deleted row (refused as a conflict with a row that is gone, never brought
/// back) — and lists once per horizon; a listing cut short leaves the device as it was and the next pull finishes it; a
/// device that syncs within the retention never lists, its query's cursor moved on by the server's watermark; a pull of
/// several tables reconciles each; the same on PostgreSQL.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct RetentionSyncTests {
    /// A to-do table whose tombstones the server keeps an hour (the tests remove them themselves, with a cutoff ahead).
    static func table(_ name: String = "TodoItem") throws -> TableConfiguration {
        var table = try TableConfiguration(name: name)
        table.tombstoneRetention = .seconds(3_600)
        return table
    }

    /// Records every request's path and query, and fails the listings (a `$select` of ids) while `failsListings`.
    final class Recording: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind locks.
        let sent = Locked<[String]>([])
        let failsListings = Locked(false)
        /// Runs once before the first request whose line contains its text.
        let before = Locked<(text: String, action: @Sendable () async throws -> Void)?>(nil)
        let inner = URLSessionTransport()

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            let line = "\(request.method) \(request.url.path)?\(request.url.query ?? "")"
            let action = before.withLock { hook -> (@Sendable () async throws -> Void)? in
                guard let found = hook, line.contains(found.text) else { return nil }
                hook = nil
                return found.action
            }
            try await action?()
            let isListing = line.contains("select=id")
            if isListing, failsListings.withLock({ $0 }) {
                throw TransportError(.unreachable, host: request.url.host ?? "")
            }
            sent.withLock { $0.append(line) }
            return try await inner.send(request)
        }

        /// How many listing requests were sent since the last call (a listing may take more than one: pages, and a
        /// `$top` the server refuses).
        func takeListings() -> Int {
            sent.withLock { lines in
                defer { lines = [] }
                return lines.filter { $0.contains("select=id") }.count
            }
        }
    }

    /// Removes every tombstone of `table` now, through a store beside the server's (the same file or database).
    static func removeTombstones(_ database: DatabaseLocation, table: String = "TodoItem") async throws -> Int {
        let name = try TableName(table)
        let far = Date().addingTimeInterval(86_400)
        switch database {
        case .sqlite(let path):
            let store = try SQLiteTableStore(path: path)
            try await store.prepare([try Self.table(table)])
            return try await store.removeTombstones(of: name, olderThan: .zero, at: far, limit: 10_000).removed
        case .postgres(let url):
            let store = try PostgresTableStore(url: url)
            return try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {
                    try await store.run()
                    return 0
                }
                try await store.prepare([try Self.table(table)])
                let removed = try await store.removeTombstones(of: name, olderThan: .zero, at: far, limit: 10_000)
                    .removed
                group.cancelAll()
                return removed
            }
        }
    }

    /// Runs `body` with a live server of `tables` on `database` (SQLite in the workspace when nil), a device maker and
    /// the database.
    static func withServer(
        _ tables: [TableConfiguration]? = nil, postgres: String? = nil,
        _ body: @Sendable (_ url: URL, _ workspace: Workspace, _ database: DatabaseLocation) async throws -> Void
    ) async throws {
        let workspace = try Workspace()
        let database =
            postgres.map { DatabaseLocation.postgres(url: $0) } ?? .sqlite(path: workspace.path("server.sqlite"))
        try await LiveServer.run(
            in: workspace, tables: try tables ?? [Self.table()], configure: { $0.database = database }
        ) { url in
            try await body(url, workspace, database)
        }
    }

    static func device(_ url: URL, _ workspace: Workspace, _ name: String, _ transport: Recording) async throws
        -> SyncClient
    {
        try await SyncClient.make(url, workspace: workspace, store: "\(name).sqlite") {
            $0.transport = transport
            $0.retryLimit = 1
        }
    }

    static func row(_ id: String, _ text: String = "x") -> JSONValue {
        ["id": .string(id), "text": .string(text), "complete": false]
    }

    static func ids(_ client: SyncClient, _ table: String = "TodoItem") async throws -> Set<String> {
        Set(try await client.syncTable(table).items().compactMap { $0["id"]?.stringValue })
    }

    @Test func aDeviceOfflinePastTheHorizonDropsWhatWasDeletedAndKeepsItsPendingChanges() async throws {
        try await Self.withServer { url, workspace, database in
            try await Self.offlinePastTheHorizon(url, workspace, database)
        }
    }

    @Test func aDeviceOfflinePastTheHorizonOfAPostgreSQLServerToo() async throws {
        guard PostgresServer.isRequired else { return }
        try await PostgresServer.withDatabase { postgres in
            try await Self.withServer(postgres: postgres) { url, workspace, database in
                try await Self.offlinePastTheHorizon(url, workspace, database)
            }
        }
    }

    /// A writes five rows; B pulls them, goes offline, edits r2 and inserts r9; A deletes r1–r3 and the server removes
    /// their tombstones, then A edits r4. B's next sync: its insert lands, its edit of r2 is a conflict with a row the
    /// server no longer has, r1 and r3 go, r4 comes changed — and a second pull lists nothing.
    static func offlinePastTheHorizon(_ url: URL, _ workspace: Workspace, _ database: DatabaseLocation) async throws {
        let (aTransport, bTransport) = (Recording(), Recording())
        let a = try await Self.device(url, workspace, "a", aTransport)
        let b = try await Self.device(url, workspace, "b", bTransport)
        let aItems = try a.syncTable("TodoItem")
        let bItems = try b.syncTable("TodoItem")
        _ = try await aItems.insert(contentsOf: (1...5).map { Self.row("r\($0)") })
        try await a.push()
        try await bItems.pull(queryID: "all")
        #expect(try await Self.ids(b) == ["r1", "r2", "r3", "r4", "r5"])
        _ = bTransport.takeListings()

        _ = try await bItems.update(Self.row("r2", "edited offline"))
        _ = try await bItems.insert(Self.row("r9", "added offline"))
        for id in ["r1", "r2", "r3"] { try await aItems.delete(id: ItemID(id)) }
        try await a.push()
        #expect(try await Self.removeTombstones(database) == 3)
        _ = try await aItems.update(Self.row("r4", "changed later"))
        try await a.push()

        let summary = try await bItems.pull(queryID: "all")
        #expect(bTransport.takeListings() > 0)
        #expect(summary.reconciliations == 1)
        #expect(summary.reconciledCount == 2)
        #expect(try await Self.ids(b) == ["r2", "r4", "r5", "r9"])
        #expect(try await bItems.item(id: ItemID("r4"))?["text"] == "changed later")
        let refused = try #require(try await b.operationErrors().first)
        #expect(refused.operation.itemID.rawValue == "r2")
        #expect(refused.isConflict)
        #expect(refused.serverItem == nil || refused.serverItem?.isDeleted == true)
        // The app takes the server's side: the row goes, not back as it was.
        try await b.resolve(refused, with: .takeServerItem)
        #expect(try await Self.ids(b) == ["r4", "r5", "r9"])
        try await aItems.pull(queryID: "all")
        #expect(try await Self.ids(a) == ["r4", "r5", "r9"])

        let again = try await bItems.pull(queryID: "all")
        #expect(bTransport.takeListings() == 0)
        #expect(again.reconciliations == 0)

        // A new device's first download past the horizon has nothing to check: no listing.
        let cTransport = Recording()
        let c = try await Self.device(url, workspace, "c", cTransport)
        #expect(try await c.syncTable("TodoItem").pull(queryID: "all").reconciliations == 0)
        #expect(cTransport.takeListings() == 0)
        #expect(try await Self.ids(c) == ["r4", "r5", "r9"])
    }

    @Test func aListingCutShortLeavesTheDeviceAsItWasAndTheNextPullFinishesIt() async throws {
        try await Self.withServer { url, workspace, database in
            let (aTransport, bTransport) = (Recording(), Recording())
            let a = try await Self.device(url, workspace, "a", aTransport)
            let b = try await Self.device(url, workspace, "b", bTransport)
            _ = try await a.syncTable("TodoItem").insert(contentsOf: (1...4).map { Self.row("r\($0)") })
            try await a.push()
            try await b.syncTable("TodoItem").pull(queryID: "all")
            try await a.syncTable("TodoItem").delete(id: ItemID("r1"))
            try await a.push()
            #expect(try await Self.removeTombstones(database) == 1)

            bTransport.failsListings.withLock { $0 = true }
            await #expect(throws: PullError.self) { try await b.syncTable("TodoItem").pull(queryID: "all") }
            #expect(try await Self.ids(b) == ["r1", "r2", "r3", "r4"])
            bTransport.failsListings.withLock { $0 = false }
            _ = bTransport.takeListings()
            let summary = try await b.syncTable("TodoItem").pull(queryID: "all")
            #expect(summary.reconciledCount == 1)
            #expect(bTransport.takeListings() > 0)
            #expect(try await Self.ids(b) == ["r2", "r3", "r4"])
        }
    }

    /// The collector removes tombstones past B's cursor between two pages of B's pull: the page that says so is not
    /// used, the pull lists again from the last page it applied, and B ends with the server's rows.
    @Test func tombstonesRemovedBetweenTwoPagesAreListedAgain() async throws {
        try await Self.withServer { url, workspace, database in
            let (aTransport, bTransport) = (Recording(), Recording())
            let a = try await Self.device(url, workspace, "a", aTransport)
            let b = try await SyncClient.make(url, workspace: workspace, store: "b.sqlite") {
                $0.transport = bTransport
                ($0.pullPageSize, $0.maxPullPageSize) = (2, 2)
            }
            let aItems = try a.syncTable("TodoItem")
            _ = try await aItems.insert(contentsOf: (1...6).map { Self.row("r\($0)") })
            try await a.push()
            try await b.syncTable("TodoItem").pull(queryID: "all")
            try await aItems.delete(id: ItemID("r1"))
            for id in 3...6 { _ = try await aItems.update(Self.row("r\(id)", "changed")) }
            try await a.push()
            #expect(try await Self.removeTombstones(database) == 1)
            // B's page after r4 (its second page of changes): r2 deleted meanwhile, and its tombstone gone.
            bTransport.before.withLock {
                $0 = (
                    "'r4'",
                    {
                        try await aItems.delete(id: ItemID("r2"))
                        try await a.push()
                        _ = try await Self.removeTombstones(database)
                    }
                )
            }
            let summary = try await b.syncTable("TodoItem").pull(queryID: "all")
            #expect(bTransport.before.withLock { $0 == nil })
            #expect(summary.reconciliations == 2)
            #expect(summary.reconciledCount == 2)
            #expect(try await Self.ids(b) == ["r3", "r4", "r5", "r6"])
            #expect(try await b.syncTable("TodoItem").item(id: ItemID("r6"))?["text"] == "changed")
        }
    }

    /// B's query sees only its own rows, which never change; A deletes others. B pulls after A's deletes and before
    /// the server removes them: the watermark moves B's cursor past them, so B never lists.
    @Test func aDeviceThatSyncsWithinTheRetentionNeverLists() async throws {
        try await Self.withServer { url, workspace, database in
            let (aTransport, bTransport) = (Recording(), Recording())
            let a = try await Self.device(url, workspace, "a", aTransport)
            let b = try await Self.device(url, workspace, "b", bTransport)
            _ = try await a.syncTable("TodoItem").insert(contentsOf: [Self.row("mine", "b's"), Self.row("other")])
            try await a.push()
            let query = TableQuery<JSONValue>().filter(.field("text") == "b's")
            try await b.syncTable("TodoItem").pull(query, queryID: "mine")
            try await a.syncTable("TodoItem").delete(id: ItemID("other"))
            try await a.push()
            try await b.syncTable("TodoItem").pull(query, queryID: "mine")
            #expect(try await Self.removeTombstones(database) == 1)
            _ = bTransport.takeListings()
            let summary = try await b.syncTable("TodoItem").pull(query, queryID: "mine")
            #expect(bTransport.takeListings() == 0)
            #expect(summary.reconciliations == 0)
            #expect(try await Self.ids(b) == ["mine"])
        }
    }

    @Test func aPullOfSeveralTablesReconcilesEachInItsTransaction() async throws {
        try await Self.withServer([try Self.table("TodoItem"), try Self.table("TodoList")]) {
            url, workspace, database in
            let (aTransport, bTransport) = (Recording(), Recording())
            let a = try await Self.device(url, workspace, "a", aTransport)
            let b = try await Self.device(url, workspace, "b", bTransport)
            for table in ["TodoItem", "TodoList"] {
                _ = try await a.syncTable(table).insert(contentsOf: (1...3).map { Self.row("\(table)-\($0)") })
            }
            try await a.push()
            let pulls = try ["TodoItem", "TodoList"].map { try b.syncTable($0).pulling(queryID: "all") }
            #expect(try await b.pullTogether(pulls).isWhole)
            for table in ["TodoItem", "TodoList"] { try await a.syncTable(table).delete(id: ItemID("\(table)-1")) }
            try await a.push()
            for table in ["TodoItem", "TodoList"] {
                #expect(try await Self.removeTombstones(database, table: table) == 1)
            }
            let summary = try await b.pullTogether(pulls)
            #expect(summary.isWhole)
            #expect(summary.tables.map(\.summary.reconciledCount) == [1, 1])
            #expect(try await Self.ids(b, "TodoItem") == ["TodoItem-2", "TodoItem-3"])
            #expect(try await Self.ids(b, "TodoList") == ["TodoList-2", "TodoList-3"])
            _ = bTransport.takeListings()
            #expect(try await b.pullTogether(pulls).tables.map(\.summary.reconciliations) == [0, 0])
            #expect(bTransport.takeListings() == 0)
        }
    }
}
