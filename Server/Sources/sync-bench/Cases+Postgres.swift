import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OfflineSync
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The cases against PostgreSQL, on the database `--database` names: its `TodoItem` table is dropped
/// and created again for each case.
extension Cases {
    /// `server.page.pg`, `pull.initial.pg`, `server.write.pg`, `server.write.peruser.pg`, `storage.churn.pg` and
    /// `server.write.aftercommit.pg`, as `wanted` selects.
    func postgres(url: String, rows: Int, wanted: (String) -> Bool) async throws -> [BenchResult] {
        let database = DatabaseLocation.postgres(url: url)
        var results: [BenchResult] = []
        if wanted("server.page.pg") {
            try await Self.resetPostgres(url)
            try await BenchServer.run(database) { _ in try await Self.seedPostgres(url, rows: rows) }
            results.append(try await serverPage(name: "server.page.pg", database: database))
        }
        if wanted("pull.initial.pg") {
            try await Self.resetPostgres(url)
            results.append(try await pullInitialPostgres(url, rows: rows))
        }
        if wanted("server.write.pg") { results.append(try await serverWritePostgres(url)) }
        if wanted("server.write.peruser.pg") { results.append(try await serverWritePerUserPostgres(url)) }
        if wanted("storage.churn.pg") { results += try await storageChurn(rows: rows * 10, database: database) }
        if wanted("server.write.aftercommit.pg") {
            results.append(
                try await serverWriteHook(
                    "server.write.aftercommit.pg", hooks: Self.afterCommitHooks, database: database))
        }
        return results
    }

    /// `pull.initial.pg`: a full pull of N rows from a server on PostgreSQL into an empty store, against
    /// raw GRDB inserts of the same rows (as `pull.initial`).
    func pullInitialPostgres(_ url: String, rows: Int) async throws -> BenchResult {
        let ours = try await BenchServer.run(.postgres(url: url)) { [self] server in
            try await Self.seedPostgres(url, rows: rows)
            var runs: [Double] = []
            for _ in 0..<repetitions {
                let table = try await client(server.url, store: "pullpg").syncTable("TodoItem", of: BenchItem.self)
                var summary: PullSummary?
                runs.append(
                    Double(rows) / (try await Measure.seconds { summary = try await table.pull(queryID: "all") }))
                guard summary?.appliedCount == rows else {
                    throw BenchError("pull.initial.pg applied \(summary?.appliedCount ?? 0) of \(rows) rows")
                }
            }
            return Measure.median(runs)
        }
        let prepared = Self.rawRows(rows)
        var reference: [Double] = []
        for _ in 0..<repetitions {
            reference.append(Double(rows) / (try await Measure.seconds { try await rawInsert(prepared) }))
        }
        return BenchResult(
            name: "pull.initial.pg", ours: ours, reference: Measure.median(reference), unit: "rows/s",
            higherIsBetter: true, n: rows)
    }

    /// `server.write.pg`: inserts from 16 concurrent connections with the cursor guarantee (stamps
    /// taken under the table's lock), against the same inserts stamped by the clock alone, as the
    /// original servers did. The ratio is what the guarantee costs.
    func serverWritePostgres(_ url: String) async throws -> BenchResult {
        let writes = quick ? 2000 : 8000
        let figures = try await writeRates(url, writes: writes, stampings: [.serialized, .clockOnly])
        return BenchResult(
            name: "server.write.pg", ours: figures[.serialized] ?? 0, reference: figures[.clockOnly],
            unit: "writes/s", higherIsBetter: true, n: writes)
    }

    /// `server.write.peruser.pg`: 16 users insert into a per-user table at once, each on a connection of
    /// their own; their stamps come from per-user rows (users never wait for each other), against the same
    /// load stamped under the one table row. The ratio is what the per-user lock buys.
    func serverWritePerUserPostgres(_ url: String) async throws -> BenchResult {
        let writes = quick ? 2000 : 8000
        var tokens: [String] = []
        for user in 0..<16 {
            tokens.append(try await makeHS256Token(subject: "user-\(user)", secret: BenchServer.secret))
        }
        let figures = try await writeRates(url, writes: writes, stampings: [.serialized, .tableRow], tokens: tokens)
        return BenchResult(
            name: "server.write.peruser.pg", ours: figures[.serialized] ?? 0, reference: figures[.tableRow],
            unit: "writes/s", higherIsBetter: true, n: writes)
    }

    /// The median writes/s of 16 concurrent inserting connections under each stamping, on a fresh table each run;
    /// with `tokens`, into a per-user table, connection `i` signed in as `tokens[i]`.
    func writeRates(
        _ url: String, writes: Int, stampings: [PostgresTableStore.Stamping], tokens: [String] = []
    ) async throws -> [PostgresTableStore.Stamping: Double] {
        var figures: [PostgresTableStore.Stamping: Double] = [:]
        for stamping in stampings {
            var runs: [Double] = []
            for run in 0..<repetitions {
                try await Self.resetPostgres(url)
                runs.append(
                    try await BenchServer.run(.postgres(url: url), stamping: stamping, perUser: !tokens.isEmpty) {
                        server in
                        try await Self.insertLoad(
                            server.url, writes: writes, connections: 16, prefix: "w\(run)", tokens: tokens)
                    })
            }
            figures[stamping] = Measure.median(runs)
        }
        return figures
    }

    /// POSTs `writes` new items from `connections` concurrent workers (worker `i` with `tokens[i]`, when given, and
    /// into the list `list(i)`, when given), each on a keep-alive connection of its own; returns writes per second. The workers are AsyncHTTPClient's: with
    /// FoundationNetworking's URLSession the client was the bottleneck (about half the rate) and now and then left a
    /// request unanswered for its 60 s (BENCHMARKS.md, "Hooks").
    static func insertLoad(
        _ url: URL, writes: Int, connections: Int, prefix: String, tokens: [String] = [],
        list: (@Sendable (Int) -> String)? = nil
    ) async throws -> Double {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .seconds(30)))
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let perWorker = writes / connections
        let target = url.appendingPathComponent("tables/TodoItem").absoluteString
        do {
            let seconds = try await Measure.seconds {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for worker in 0..<connections {
                        group.addTask {
                            for index in 0..<perWorker {
                                var request = HTTPClientRequest(url: target)
                                request.method = .POST
                                if worker < tokens.count {
                                    request.headers.add(name: "Authorization", value: "Bearer \(tokens[worker])")
                                }
                                request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                                request.headers.add(name: "Content-Type", value: "application/json")
                                request.body = .bytes(
                                    ByteBuffer(
                                        string:
                                            #"{"id":"\#(prefix)-\#(worker)-\#(index)","text":"Task \#(index)","complete":false\#(list.map { #","listId":"\#($0(worker))""# } ?? "")}"#
                                    ))
                                let response = try await http.execute(request, timeout: .seconds(30))
                                _ = try await response.body.collect(upTo: 1 << 20)
                                guard response.status.code == 201 else {
                                    throw BenchError("POST /tables/TodoItem answered \(response.status.code)")
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await http.shutdown()
            return Double(perWorker * connections) / seconds
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    /// Drops the benchmark's tables (and their bookkeeping), so that the next server creates them afresh.
    static func resetPostgres(_ url: String) async throws {
        try await DatabaseURL(parsing: url).execute(
            #"DROP TABLE IF EXISTS "todoitem""#,
            #"DO $$ BEGIN DELETE FROM "__sync_tables" WHERE "name" = 'todoitem'; EXCEPTION WHEN undefined_table THEN NULL; END $$"#,
            #"DO $$ BEGIN DELETE FROM "__sync_owner_stamps" WHERE "table" = 'todoitem'; EXCEPTION WHEN undefined_table THEN NULL; END $$"#,
            #"DO $$ BEGIN DELETE FROM "__sync_outbox" WHERE "table" = 'todoitem'; EXCEPTION WHEN undefined_table THEN NULL; END $$"#,
            #"DROP TABLE IF EXISTS "listmember""#,
            #"DO $$ BEGIN DELETE FROM "__sync_tables" WHERE "name" = 'listmember'; EXCEPTION WHEN undefined_table THEN NULL; END $$"#,
            #"DO $$ BEGIN DELETE FROM "__sync_scope_exits"; EXCEPTION WHEN undefined_table THEN NULL; END $$"#
        )
    }

    /// Fills the (created, empty) table with `rows` rows stamped 1 ms apart, as ``BenchServer/seed(path:rows:)``
    /// does for SQLite, and moves the table's stamp past them.
    static func seedPostgres(_ url: String, rows: Int) async throws {
        try await DatabaseURL(parsing: url).execute(
            """
            INSERT INTO "todoitem" ("id", "createdAt", "updatedAt", "version", "deleted", "text", "complete")
            SELECT 'item-' || lpad(i::text, 7, '0'), 1700000000000 + i, 1700000000000 + i, 'v' || (1700000000000 + i),
                   false, 'Task number ' || i, i % 2 = 0
            FROM generate_series(0, \(rows - 1)) AS i
            """,
            #"UPDATE "__sync_tables" SET "lastStamp" = \#(1_700_000_000_000 + rows) WHERE "name" = 'todoitem'"#,
            #"ANALYZE "todoitem""#)
    }
}
