import Foundation
import GRDB
import OfflineSync
import SyncCore
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The cases of shared lists (docs/sharing.md): what joining and leaving a list costs a device, and what scoping costs
/// the server on PostgreSQL.
extension Cases {
    /// `share.join` and `share.removal`: bob's device joins a list of `rows` rows whose every row is older than its
    /// cursor — the pull that brings them (the listing of the scope, then every row) against a first pull of the same
    /// rows into an empty store; then bob is removed, and his next pull removes them all, against the same first pull.
    /// On SQLite, in this process, seconds.
    func sharing(rows: Int, wanted: (String) -> Bool) async throws -> [BenchResult] {
        guard wanted("share.join") || wanted("share.removal") else { return [] }
        var (joins, firsts, removals) = ([Double](), [Double](), [Double]())
        for run in 0..<repetitions {
            let serverPath = path("shared")
            try await Self.seedShared(path: serverPath, rows: rows)
            let figures = try await BenchServer.run(.sqlite(path: serverPath), shared: true) { [self] server in
                let (alice, bob) = (try await Self.sharedToken("alice"), try await Self.sharedToken("bob"))
                func device(_ name: String) async throws -> SyncTable<BenchItem> {
                    var configuration = SyncClient.Configuration()
                    configuration.transport = Self.transport(named: transport)
                    configuration.protocol = dialect
                    configuration.tokenProvider = { _ in bob }
                    let client = SyncClient(
                        url: server.url, store: try SQLiteLocalStore(path: path(name)), configuration: configuration)
                    return try client.syncTable("TodoItem", of: BenchItem.self)
                }
                let joining = try await device("join")
                try await joining.pull(queryID: "all")  // nothing yet: bob is in no list
                try await Self.send("POST", server.url, "/tables/ListMember", token: alice, json: Self.bobMember(run))
                var summary = PullSummary?.none
                let join = try await Measure.seconds { summary = try await joining.pull(queryID: "all") }
                guard summary?.appliedCount == rows else {
                    throw BenchError("share.join applied \(summary?.appliedCount ?? 0) of \(rows) rows")
                }
                let first = try await Measure.seconds { summary = try await device("first").pull(queryID: "all") }
                guard summary?.appliedCount == rows else {
                    throw BenchError("share.join's first pull applied \(summary?.appliedCount ?? 0) of \(rows) rows")
                }
                try await Self.send("DELETE", server.url, "/tables/ListMember/m-bob-\(run)", token: alice)
                let removal = try await Measure.seconds { summary = try await joining.pull(queryID: "all") }
                guard summary?.removedCount == rows else {
                    throw BenchError("share.removal removed \(summary?.removedCount ?? 0) of \(rows) rows")
                }
                return (join, first, removal)
            }
            joins.append(figures.0)
            firsts.append(figures.1)
            removals.append(figures.2)
        }
        var results: [BenchResult] = []
        if wanted("share.join") {
            results.append(
                BenchResult(
                    name: "share.join", ours: Measure.median(joins), reference: Measure.median(firsts), unit: "s",
                    higherIsBetter: false, n: rows))
        }
        if wanted("share.removal") {
            results.append(
                BenchResult(
                    name: "share.removal", ours: Measure.median(removals), reference: Measure.median(firsts),
                    unit: "s", higherIsBetter: false, n: rows))
        }
        return results
    }

    /// `server.page.shared.pg` and `server.write.shared.pg`: the PostgreSQL cases of `server.page.pg` and
    /// `server.write.pg` on a shared `TodoItem` (100 lists; the reader is in 10 of them, each writer owns one),
    /// against the same load on the unscoped table.
    func sharingPostgres(url: String, rows: Int, wanted: (String) -> Bool) async throws -> [BenchResult] {
        let database = DatabaseLocation.postgres(url: url)
        var results: [BenchResult] = []
        if wanted("server.page.shared.pg") {
            try await Self.resetPostgres(url)
            try await BenchServer.run(database) { _ in try await Self.seedPostgres(url, rows: rows) }
            let unscoped = try await serverPage(name: "server.page.pg", database: database)
            try await Self.resetPostgres(url)
            try await BenchServer.run(database, shared: true) { _ in try await Self.seedSharedPostgres(url, rows: rows)
            }
            let reader = try await Self.sharedToken("reader")
            let scoped = try await serverPage(
                name: "server.page.shared.pg", database: database, shared: true,
                headers: ["Authorization": "Bearer \(reader)"])
            results.append(
                BenchResult(
                    name: "server.page.shared.pg", ours: scoped.ours, reference: unscoped.ours, unit: "req/s",
                    higherIsBetter: true, n: scoped.n))
        }
        if wanted("server.write.shared.pg") {
            let writes = quick ? 2000 : 8000
            let unscoped = try await writeRates(url, writes: writes, stampings: [.serialized])[.serialized] ?? 0
            var runs: [Double] = []
            var tokens: [String] = []
            for writer in 0..<16 { tokens.append(try await Self.sharedToken("writer-\(writer)")) }
            for run in 0..<repetitions {
                try await Self.resetPostgres(url)
                runs.append(
                    try await BenchServer.run(database, shared: true) { [tokens] server in
                        try await Self.seedSharedPostgres(url, rows: 0)
                        return try await Self.insertLoad(
                            server.url, writes: writes, connections: 16, prefix: "w\(run)", tokens: tokens,
                            list: { "g\($0)" })
                    })
            }
            results.append(
                BenchResult(
                    name: "server.write.shared.pg", ours: Measure.median(runs), reference: unscoped,
                    unit: "writes/s", higherIsBetter: true, n: writes))
        }
        return results
    }

    /// Bob's member row of run `run`'s list, as a viewer.
    static func bobMember(_ run: Int) -> JSONValue {
        ["id": .string("m-bob-\(run)"), "listId": "big", "userId": "bob", "role": "viewer"]
    }

    static func sharedToken(_ user: String) async throws -> String {
        try await makeHS256Token(subject: user, secret: BenchServer.secret)
    }

    /// Sends one request with a token; anything but a 2xx is an error.
    static func send(_ method: String, _ server: URL, _ path: String, token: String, json: JSONValue? = nil)
        async throws
    {
        var request = URLRequest(url: URL(string: server.absoluteString + path)!)
        request.httpMethod = method
        request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = json.serializedData()
        }
        let (_, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { throw BenchError("\(method) \(path) answered \(status)") }
    }

    /// A server file whose shared `TodoItem` holds `rows` rows of the list `big`, owned by alice.
    static func seedShared(path: String, rows: Int) async throws {
        let store = try SQLiteTableStore(path: path)
        try await store.prepare(try BenchServer.sharedTables())
        let database = try DatabaseQueue(path: path)
        let base: Int64 = 1_700_000_000_000
        try await database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO listmember (id, createdAt, updatedAt, version, deleted, listId, userId, role)
                    VALUES ('m-alice', ?, ?, 'v0', 0, 'big', 'alice', 'owner')
                    """, arguments: [base, base])
            let statement = try db.makeStatement(
                sql: """
                    INSERT INTO todoitem (id, createdAt, updatedAt, version, deleted, text, complete, listId)
                    VALUES (?, ?, ?, ?, 0, ?, ?, 'big')
                    """)
            for index in 0..<rows {
                let stamp = base + Int64(index)
                try statement.execute(arguments: [
                    String(format: "item-%07d", index), stamp, stamp, "v\(stamp)", "Task number \(index)",
                    index % 2 == 0,
                ])
            }
        }
    }

    /// Fills the shared tables on PostgreSQL: `rows` rows over 100 lists `g0`…`g99`; `reader` is a viewer of
    /// `g0`…`g9`, `writer-N` owns `gN` (N < 16), and 10 other users are in every list.
    static func seedSharedPostgres(_ url: String, rows: Int) async throws {
        var statements = [
            """
            INSERT INTO "listmember" ("id", "createdAt", "updatedAt", "version", "deleted", "listId", "userId", "role")
            SELECT 'm-' || u || '-' || g, 1, 1, 'v', false, 'g' || g, 'user-' || u, 'editor'
            FROM generate_series(0, 99) AS g, generate_series(0, 9) AS u
            """,
            """
            INSERT INTO "listmember" ("id", "createdAt", "updatedAt", "version", "deleted", "listId", "userId", "role")
            SELECT 'm-reader-' || g, 1, 1, 'v', false, 'g' || g, 'reader', 'viewer' FROM generate_series(0, 9) AS g
            """,
            """
            INSERT INTO "listmember" ("id", "createdAt", "updatedAt", "version", "deleted", "listId", "userId", "role")
            SELECT 'm-writer-' || g, 1, 1, 'v', false, 'g' || g, 'writer-' || g, 'owner' FROM generate_series(0, 15) AS g
            """,
        ]
        if rows > 0 {
            statements.append(
                """
                INSERT INTO "todoitem" ("id", "createdAt", "updatedAt", "version", "deleted", "text", "complete", "listId")
                SELECT 'item-' || lpad(i::text, 7, '0'), 1700000000000 + i, 1700000000000 + i, 'v' || (1700000000000 + i),
                       false, 'Task number ' || i, i % 2 = 0, 'g' || (i % 100)
                FROM generate_series(0, \(rows - 1)) AS i
                """)
            statements.append(
                #"UPDATE "__sync_tables" SET "lastStamp" = \#(1_700_000_000_000 + rows) WHERE "name" = 'todoitem'"#)
        }
        statements += [#"ANALYZE "todoitem""#, #"ANALYZE "listmember""#]
        for statement in statements { try await DatabaseURL(parsing: url).execute(statement) }
    }
}
