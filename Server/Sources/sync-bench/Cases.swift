import Foundation
import GRDB
import OfflineSync
import OfflineSyncAsyncHTTPClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct BenchItem: Codable, Sendable {
    var id: String
    var text: String
    var complete: Bool
}

/// The benchmark cases; each returns our figure beside its reference, medians of `repetitions`.
struct Cases {
    let directory: URL
    let repetitions: Int
    let quick: Bool
    /// Which transport the clients use: `urlsession` (the default) or `async-http-client`.
    let transport: String
    /// The dialect the clients speak.
    var dialect = SyncClient.ProtocolVersion.v2

    /// A client on a fresh store at `name`, with the chosen transport.
    func client(_ url: URL, store name: String, batchPush: SyncClient.BatchPush = .whenOffered) async throws
        -> SyncClient
    {
        var configuration = SyncClient.Configuration()
        configuration.transport = Self.transport(named: transport)
        configuration.batchPush = batchPush
        configuration.protocol = dialect
        return SyncClient(
            url: url, store: try SQLiteLocalStore(path: path(name)), configuration: configuration)
    }

    static func transport(named name: String) -> any HTTPTransport {
        name == "async-http-client" ? AsyncHTTPClientTransport() : URLSessionTransport()
    }

    func path(_ name: String) -> String {
        directory.appendingPathComponent("\(name)-\(UUID().uuidString).sqlite").path
    }

    static let deadServer = URL(string: "http://127.0.0.1:9")!

    /// `local.insert`: `SyncTable.insert` (row + queue, one transaction each) against raw GRDB, one commit per row.
    func localInsert() async throws -> BenchResult {
        let count = quick ? 1000 : 5000
        var ours: [Double] = []
        var reference: [Double] = []
        for _ in 0..<repetitions {
            let client = SyncClient(url: Self.deadServer, store: try SQLiteLocalStore(path: path("local")))
            let table = try client.syncTable("TodoItem", of: BenchItem.self)
            ours.append(
                Double(count)
                    / (try await Measure.seconds {
                        for index in 0..<count {
                            try await table.insert(BenchItem(id: "i\(index)", text: "Task \(index)", complete: false))
                        }
                    }))
            let pool = try DatabasePool(path: path("raw"))
            try await pool.write { db in
                try db.execute(sql: "CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, data TEXT NOT NULL)")
            }
            reference.append(
                Double(count)
                    / (try await Measure.seconds {
                        for index in 0..<count {
                            try await pool.write { db in
                                try db.execute(
                                    sql: "INSERT INTO t VALUES (?, ?)",
                                    arguments: [
                                        "i\(index)", #"{"complete":false,"id":"i\#(index)","text":"Task \#(index)"}"#,
                                    ])
                            }
                        }
                    }))
        }
        return BenchResult(
            name: "local.insert", ours: Measure.median(ours), reference: Measure.median(reference),
            unit: "ops/s", higherIsBetter: true, n: count)
    }

    /// `pull.initial`, `pull.noop`: a full pull of N rows into an empty store against raw GRDB inserts of the
    /// same rows (one transaction per 1,000); then a pull with nothing new against one HTTP round trip.
    func pulls(rows: Int) async throws -> [BenchResult] {
        let serverPath = path("server")
        try await BenchServer.seed(path: serverPath, rows: rows)
        return try await BenchServer.run(path: serverPath) { [self] server in
            var (ours, reference, noop, roundTrip): ([Double], [Double], [Double], [Double]) = ([], [], [], [])
            var (incremental, incrementalReference): ([Double], [Double]) = ([], [])
            var (localQuery, localQueryReference): ([Double], [Double]) = ([], [])
            var noopRequests = 0
            for _ in 0..<repetitions {
                let client = try await client(server.url, store: "pull")
                let table = try client.syncTable("TodoItem", of: BenchItem.self)
                var summary: PullSummary?
                ours.append(
                    Double(rows) / (try await Measure.seconds { summary = try await table.pull(queryID: "all") }))
                guard summary?.appliedCount == rows else {
                    throw BenchError("pull.initial applied \(summary?.appliedCount ?? 0) of \(rows) rows")
                }
                var again: PullSummary?
                noop.append(try await Measure.seconds { again = try await table.pull(queryID: "all") } * 1000)
                noopRequests = again?.requestCount ?? 0
                let prepared = Self.rawRows(rows)
                reference.append(Double(rows) / (try await Measure.seconds { try await rawInsert(prepared) }))
                roundTrip.append(try await Measure.seconds { try await httpRoundTrip(server.url) } * 1000)
                // pull.incremental: 10 rows change on the server, then the same client pulls.
                try await Self.changeTenRows(of: rows, through: try client.table("TodoItem", of: BenchItem.self))
                var changed: PullSummary?
                incremental.append(try await Measure.seconds { changed = try await table.pull(queryID: "all") } * 1000)
                guard changed?.appliedCount == 10 else {
                    throw BenchError("pull.incremental applied \(changed?.appliedCount ?? 0) of 10")
                }
                incrementalReference.append(
                    try await cursorQuery(serverPath)
                        + (try await Measure.seconds { try await httpRoundTrip(server.url) }) * 1000)
                // local.query: one indexed page of 50 decoded items from the pulled store.
                let (query, middle) = try await measureLocalQuery(table, rows: rows)
                localQuery.append(query)
                localQueryReference.append(try await rawQuery(rows: rows, after: middle, times: quick ? 200 : 1000))
            }
            return [
                BenchResult(
                    name: "pull.initial", ours: Measure.median(ours), reference: Measure.median(reference),
                    unit: "rows/s", higherIsBetter: true, n: rows),
                BenchResult(
                    name: "pull.noop", ours: Measure.median(noop), reference: Measure.median(roundTrip),
                    unit: "ms", higherIsBetter: false, n: noopRequests),
                BenchResult(
                    name: "pull.incremental", ours: Measure.median(incremental),
                    reference: Measure.median(incrementalReference),
                    unit: "ms", higherIsBetter: false, n: 10),
                BenchResult(
                    name: "local.query", ours: Measure.median(localQuery),
                    reference: Measure.median(localQueryReference),
                    unit: "µs", higherIsBetter: false, n: 50),
            ]
        }
    }

    /// Changes the text of 10 of the server's `rows` rows, spread over them.
    private static func changeTenRows(of rows: Int, through remote: RemoteTable<BenchItem>) async throws {
        for index in stride(from: 0, to: rows, by: max(rows / 10, 1)).prefix(10) {
            let id = String(format: "item-%07d", index)
            guard var item = try await remote.item(id: try ItemID(id)) else { throw BenchError("missing \(id)") }
            item.text += " (changed)"
            try await remote.update(item)
        }
    }

    /// `local.query`: the microseconds of one indexed page of 50 decoded items after the middle row of the pulled
    /// store (200 pages with `--quick`, else 1,000), and that row's id.
    private func measureLocalQuery(_ table: SyncTable<BenchItem>, rows: Int) async throws -> (Double, String) {
        let middle = try Self.require(
            try await table.items(matching: TableQuery().orderBy("updatedAt").skip(rows / 2).top(1)).first)
        let query = TableQuery<BenchItem>().filter { $0.id > middle.id }.orderBy(\.id).top(50)
        let queries = quick ? 200 : 1000
        let seconds = try await Measure.seconds {
            for _ in 0..<queries {
                guard try await table.items(matching: query).count == 50 else { throw BenchError("short page") }
            }
        }
        return (seconds / Double(queries) * 1_000_000, middle.id)
    }

    /// `pull.initial.1m`: `pull.initial` with 1,000,000 rows, once, against the reference's raw inserts of the same
    /// rows, once (a first sync of a large table; about a minute in all).
    func pullInitialMillion() async throws -> BenchResult {
        let rows = 1_000_000
        let serverPath = path("server-1m")
        try await BenchServer.seed(path: serverPath, rows: rows)
        return try await BenchServer.run(path: serverPath) { [self] server in
            let table = try await client(server.url, store: "pull-1m").syncTable("TodoItem", of: BenchItem.self)
            var summary: PullSummary?
            let ours = Double(rows) / (try await Measure.seconds { summary = try await table.pull(queryID: "all") })
            guard summary?.appliedCount == rows else {
                throw BenchError("pull.initial.1m applied \(summary?.appliedCount ?? 0) of \(rows) rows")
            }
            let prepared = Self.rawRows(rows)
            let reference = Double(rows) / (try await Measure.seconds { try await rawInsert(prepared) })
            return BenchResult(
                name: "pull.initial.1m", ours: ours, reference: reference, unit: "rows/s", higherIsBetter: true,
                n: rows)
        }
    }

    /// The rows the reference inserts, prepared before it is timed.
    static func rawRows(_ rows: Int) -> [(id: String, data: String)] {
        (0..<rows).map { index in
            let id = String(format: "item-%07d", index)
            return (
                id,
                #"{"complete":true,"createdAt":"2023-11-14T22:13:20.000Z","deleted":false,"id":"\#(id)","text":"Task number \#(index)","updatedAt":"2023-11-14T22:13:20.000Z","version":"v1700000000000"}"#
            )
        }
    }

    func rawInsert(_ rows: [(id: String, data: String)]) async throws {
        let pool = try DatabasePool(path: path("rawpull"))
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, updatedAt TEXT, data TEXT NOT NULL)")
        }
        for start in stride(from: 0, to: rows.count, by: 1000) {
            try await pool.write { db in
                let statement = try db.makeStatement(sql: "INSERT INTO t VALUES (?, ?, ?)")
                for row in rows[start..<min(start + 1000, rows.count)] {
                    try statement.execute(arguments: [row.id, "2023-11-14T22:13:20.000Z", row.data])
                }
            }
        }
    }

    /// One indexed cursor page query on the server's file, in milliseconds.
    private func cursorQuery(_ serverPath: String) async throws -> Double {
        let database = try DatabaseQueue(path: serverPath)
        return try await Measure.seconds {
            _ = try await database.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT * FROM todoitem WHERE ("updatedAt", "id") > (?, ?) ORDER BY "updatedAt", "id" LIMIT 1000
                        """, arguments: [1_700_000_000_000 + 1, "item-0000001"]
                ).count
            }
        } * 1000
    }

    /// The same page from a plain GRDB table with real columns, decoded row by row: µs per query.
    private func rawQuery(rows: Int, after id: String, times: Int) async throws -> Double {
        let database = try DatabasePool(path: path("rawquery"))
        try await database.write { db in
            try db.execute(
                sql: "CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, text TEXT NOT NULL, complete INTEGER NOT NULL)")
            let statement = try db.makeStatement(sql: "INSERT INTO t VALUES (?, ?, ?)")
            for index in 0..<rows {
                try statement.execute(arguments: [
                    String(format: "item-%07d", index), "Task number \(index)", index % 2 == 0,
                ])
            }
        }
        return try await Measure.seconds {
            for _ in 0..<times {
                let items = try await database.read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT id, text, complete FROM t WHERE id > ? ORDER BY id LIMIT 50", arguments: [id]
                    )
                    .map { BenchItem(id: $0["id"], text: $0["text"], complete: $0["complete"]) }
                }
                guard items.count == 50 else { throw BenchError("short raw page") }
            }
        } / Double(times) * 1_000_000
    }

    func httpRoundTrip(_ url: URL) async throws {
        let (_, response) = try await URLSession.shared.data(from: url.appendingPathComponent("health"))
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw BenchError("health check failed") }
    }
}

extension Cases {
    static func require<T>(_ value: T?) throws -> T {
        guard let value else { throw BenchError("an expected row is missing") }
        return value
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
