import Foundation
import OfflineSync
import OfflineSyncEncryption

extension Cases {
    /// The key of the encrypted twins' stores: raw, so that opening costs no key derivation.
    static var benchKey: StoreKey { get throws { try StoreKey.raw([UInt8](repeating: 0x5A, count: 32)) } }

    /// A store at a fresh path: encrypted (docs/encryption.md) or plain.
    func store(_ name: String, encrypted: Bool) throws -> SQLiteLocalStore {
        encrypted
            ? try SQLiteLocalStore.encrypted(path: path(name), key: try Self.benchKey)
            : try SQLiteLocalStore(path: path(name))
    }

    /// The encrypted twins (issue 48): `local.insert.encrypted`, `local.query.encrypted` and `pull.initial.encrypted`,
    /// each our encrypted store against the plain one doing the same work in the same run, alternating which goes
    /// first. Above 0.8 is the target (about the cost Realm documents for its encryption).
    func encryptedTwins(rows: Int) async throws -> [BenchResult] {
        let count = quick ? 1000 : 5000
        let serverPath = path("server-twins")
        try await BenchServer.seed(path: serverPath, rows: rows)
        let (inserts, pulls, queries) = try await BenchServer.run(path: serverPath) { [self] server in
            var inserts: [Bool: [Double]] = [:]
            var pulls: [Bool: [Double]] = [:]
            var queries: [Bool: [Double]] = [:]
            for repetition in 0..<repetitions {
                for encrypted in repetition % 2 == 0 ? [true, false] : [false, true] {
                    let local = SyncClient(url: Self.deadServer, store: try store("insert", encrypted: encrypted))
                    let table = try local.syncTable("TodoItem", of: BenchItem.self)
                    let seconds = try await Measure.seconds {
                        for index in 0..<count {
                            try await table.insert(BenchItem(id: "i\(index)", text: "Task \(index)", complete: false))
                        }
                    }
                    inserts[encrypted, default: []].append(Double(count) / seconds)
                    var configuration = SyncClient.Configuration()
                    configuration.transport = Self.transport(named: transport)
                    configuration.protocol = dialect
                    let client = SyncClient(
                        url: server.url, store: try store("pull", encrypted: encrypted), configuration: configuration)
                    let pulled = try client.syncTable("TodoItem", of: BenchItem.self)
                    var summary: PullSummary?
                    let pull = try await Measure.seconds { summary = try await pulled.pull(queryID: "all") }
                    guard summary?.appliedCount == rows else {
                        throw BenchError("pull.initial.encrypted applied \(summary?.appliedCount ?? 0) of \(rows)")
                    }
                    pulls[encrypted, default: []].append(Double(rows) / pull)
                    let query = TableQuery<BenchItem>().filter { $0.id > String(format: "item-%07d", rows / 2) }
                        .orderBy(\.id).top(50)
                    let times = quick ? 200 : 1000
                    let querying = try await Measure.seconds {
                        for _ in 0..<times {
                            guard try await pulled.items(matching: query).count == 50 else {
                                throw BenchError("short page")
                            }
                        }
                    }
                    queries[encrypted, default: []].append(querying / Double(times) * 1_000_000)
                }
            }
            return (inserts, pulls, queries)
        }
        func result(_ name: String, _ figures: [Bool: [Double]], unit: String, higher: Bool, n: Int) -> BenchResult {
            BenchResult(
                name: name, ours: Measure.median(figures[true] ?? []), reference: Measure.median(figures[false] ?? []),
                unit: unit, higherIsBetter: higher, n: n)
        }
        return [
            result("local.insert.encrypted", inserts, unit: "ops/s", higher: true, n: count),
            result("local.query.encrypted", queries, unit: "µs", higher: false, n: 50),
            result("pull.initial.encrypted", pulls, unit: "rows/s", higher: true, n: rows),
        ]
    }
}
