import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore
import SyncSQLite
import SyncServer

/// `storage.churn` (and `storage.churn.pg`, issue 66): rows inserted and deleted through the server's `/batch`, once
/// with a tombstone retention and once without, while a reader reads pages of the table.
///
/// Four writers each send batches of 500 operations: 250 new rows, and the deletes of the 250 its batch before
/// inserted — so the live rows stay about 1,000 and every insert becomes a tombstone. Figures:
/// - `storage.churn.kept`: the most rows the table held at once with the retention (sampled every 250 ms), against
///   the bound of its window: the deletes of `retention + collection interval + 1 s` at the measured delete rate, plus
///   the live rows (ratio above 1: within the bound). Without a retention, the table ends with every tombstone.
/// - `storage.churn.p99`: the 99th percentile of a 50-row page read while the churn runs with the collector, against
///   the same without it (lower is better; the cost of the purge on concurrent pulls).
/// - `storage.churn.size` (SQLite): the database's bytes at the end, with the retention against without.
extension Cases {
    /// The retention of the churn: short, so that a run shows several collections.
    static let churnRetention = Duration.seconds(5)

    func storageChurn(rows: Int, database: DatabaseLocation? = nil) async throws -> [BenchResult] {
        let suffix = database == nil ? "" : ".pg"
        var phases: [ChurnPhase] = []
        for retained in [false, true] {
            if case .postgres(let url)? = database { try await Self.resetPostgres(url) }
            let location = database ?? .sqlite(path: path("churn-\(retained)"))
            let phase = try await BenchServer.run(location, retention: retained ? Self.churnRetention : nil) {
                server in
                try await Self.churn(server.url, rows: rows)
            }
            var measured = phase
            if case .sqlite(let file) = location {
                measured.bytes = [file, file + "-wal"].compactMap {
                    (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? nil
                }.reduce(0, +)
            }
            phases.append(measured)
        }
        let (plain, retained) = (phases[0], phases[1])
        let window = Measure.seconds(Self.churnRetention) + 1 + 1  // the collection interval, and a second's slack
        let bound = Double(Self.churnLive) + retained.deleteRate * window
        var results = [
            BenchResult(
                name: "storage.churn.kept" + suffix, ours: Double(retained.mostKept), reference: bound, unit: "rows",
                higherIsBetter: false, n: rows),
            BenchResult(
                name: "storage.churn.p99" + suffix, ours: retained.readP99 * 1000, reference: plain.readP99 * 1000,
                unit: "ms", higherIsBetter: false, n: retained.reads),
        ]
        if database == nil {
            results.append(
                BenchResult(
                    name: "storage.churn.size", ours: Double(retained.bytes), reference: Double(plain.bytes),
                    unit: "bytes", higherIsBetter: false, n: rows))
        }
        print(
            "storage.churn\(suffix): \(rows) rows in and out; without retention \(plain.mostKept) rows kept at the end "
                + String(format: "(%.0f deletes/s)", plain.deleteRate) + ", with \(retained.mostKept) at most "
                + String(format: "(%.0f deletes/s; bound %.0f)", retained.deleteRate, bound))
        return results
    }

    /// About how many rows are live during the churn: four writers' last batch each.
    static let churnLive = 4 * 250

    struct ChurnPhase: Sendable {
        var deleteRate: Double
        var mostKept: Int
        var readP99: Double
        var reads: Int
        var bytes = 0
    }

    /// The churn against the server at `url`: `rows` rows in and out, a reader and a sampler beside it.
    static func churn(_ url: URL, rows: Int) async throws -> ChurnPhase {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let batches = max(2, rows / (4 * 250))
        let done = Locked(false)
        async let reads = readPages(http, url, until: done)
        async let kept = sampleKept(http, url, until: done)
        let seconds: Double
        do {
            seconds = try await Measure.seconds {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<4 {
                        group.addTask { try await writeBatches(http, url, writer: writer, batches: batches) }
                    }
                    try await group.waitForAll()
                }
            }
        } catch {
            done.withLock { $0 = true }
            _ = try? await (reads, kept)
            try await http.shutdown()
            throw error
        }
        done.withLock { $0 = true }
        let (latencies, most) = try await (reads, kept)
        let final = try await count(http, url)
        try await http.shutdown()
        let sorted = latencies.sorted()
        return ChurnPhase(
            deleteRate: Double((batches - 1) * 4 * 250) / seconds, mostKept: max(most, final),
            readP99: sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 99 / 100)], reads: sorted.count)
    }

    /// One writer's batches: 250 inserts of new rows and the deletes of its batch before's.
    private static func writeBatches(_ http: HTTPClient, _ url: URL, writer: Int, batches: Int) async throws {
        for batch in 0..<batches {
            var operations: [String] = (0..<250).map { index in
                #"{"method":"POST","url":"tables/TodoItem","body":{"id":"w\#(writer)-\#(batch)-\#(index)","text":"Task \#(index)","complete":false}}"#
            }
            if batch > 0 {
                operations += (0..<250).map { index in
                    #"{"method":"DELETE","url":"tables/TodoItem/w\#(writer)-\#(batch - 1)-\#(index)"}"#
                }
            }
            var request = HTTPClientRequest(url: url.appendingPathComponent("batch").absoluteString)
            request.method = .POST
            request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: #"{"requests":["# + operations.joined(separator: ",") + "]}"))
            let response = try await http.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 1 << 24)
            guard response.status.code == 200, !String(buffer: body).contains(#""status":5"#) else {
                throw BenchError("storage.churn: a batch answered \(response.status.code)")
            }
        }
    }

    /// Reads 50-row pages of the live rows until `done`, one after another: each read's seconds.
    private static func readPages(_ http: HTTPClient, _ url: URL, until done: Locked<Bool>) async throws
        -> [Double]
    {
        var latencies: [Double] = []
        var request = HTTPClientRequest(url: url.appendingPathComponent("tables/TodoItem").absoluteString + "?$top=50")
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        while !done.withLock({ $0 }) {
            let seconds = try await Measure.seconds {
                let response = try await http.execute(request, timeout: .seconds(60))
                _ = try await response.body.collect(upTo: 1 << 24)
            }
            latencies.append(seconds)
        }
        return latencies
    }

    /// The most rows (live and tombstones) the table held at any sample, every 250 ms until `done`.
    private static func sampleKept(_ http: HTTPClient, _ url: URL, until done: Locked<Bool>) async throws -> Int {
        var most = 0
        while !done.withLock({ $0 }) {
            most = max(most, try await count(http, url))
            try await Task.sleep(for: .milliseconds(250))
        }
        return most
    }

    /// How many rows the table holds, tombstones too.
    private static func count(_ http: HTTPClient, _ url: URL) async throws -> Int {
        var request = HTTPClientRequest(
            url: url.appendingPathComponent("tables/TodoItem").absoluteString
                + "?$top=1&$select=id&$inlinecount=allpages&__includeDeleted=true")
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        let response = try await http.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard let count = try JSONValue(parsing: String(buffer: body))["count"]?.intValue else {
            throw BenchError("storage.churn: no count in \(String(buffer: body).prefix(200))")
        }
        return Int(count)
    }
}
