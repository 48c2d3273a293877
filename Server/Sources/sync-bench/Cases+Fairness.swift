import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore
import SyncSQLite
import SyncServer

/// `fairness` (and `fairness.pg`, issue 67): one caller's heavy load beside another's small requests, on a server with
/// fair shares (the defaults) and without.
///
/// User A sends from 32 connections at once, for 6 s: 1,000-row pages of a 20,000-row table (`pages`), or `/batch`
/// requests of 500 inserts (`batches`). User B sends one request after another: a 10-row read, then a one-row insert.
/// Each phase runs on a fresh copy of the table. Figures, for each load:
/// - `fairness.<load>.b.p99`: B's 99th percentile under A with fair shares, against the target — 3 × B's p99 alone,
///   plus 20 ms (ratio above 1: within it). The same without shares is printed beside it.
/// - `fairness.<load>.a.share`: A's requests a second under fair shares with B, against A alone without shares (the
///   cost of fairness; the target is a ratio of 0.8 or more).
/// B's failed requests (any answer but 2xx) are printed, and fail the case when there are any under fair shares.
/// The load comes from this process, as the server does: both share its cores.
extension Cases {
    enum FairLoad: String, CaseIterable, Sendable {
        case pages, batches
    }

    struct FairPhase: Sendable {
        var bLatencies: [Double] = []
        var bFailures = 0
        var aRequests = 0
        var seconds = 0.0

        var bP99: Double {
            let sorted = bLatencies.sorted()
            return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
        }
        var aRate: Double { seconds > 0 ? Double(aRequests) / seconds : 0 }
    }

    static let fairnessRows = 20_000
    static let fairnessPhase = Duration.seconds(6)

    func fairness(database: String? = nil) async throws -> [BenchResult] {
        let suffix = database == nil ? "" : ".pg"
        var off = FairShares()
        off.isOn = false
        let alone = try await fairPhase(database, shares: FairShares(), load: nil, b: true)
        var results: [BenchResult] = []
        for load in FairLoad.allCases {
            let aAlone = try await fairPhase(database, shares: off, load: load, b: false)
            let aAloneFair = try await fairPhase(database, shares: FairShares(), load: load, b: false)
            let fair = try await fairPhase(database, shares: FairShares(), load: load, b: true)
            let unfair = try await fairPhase(database, shares: off, load: load, b: true)
            print(
                String(
                    format: "fairness%@ (%@): B's p99 alone %.1f ms; under A without shares %.1f ms (%d failed), with "
                        + "shares %.1f ms (%d failed); A %.0f requests/s alone (%.0f alone with shares), %.0f with shares and "
                        + "B, %.0f without",
                    suffix, load.rawValue, alone.bP99 * 1000, unfair.bP99 * 1000, unfair.bFailures, fair.bP99 * 1000,
                    fair.bFailures, aAlone.aRate, aAloneFair.aRate, fair.aRate, unfair.aRate))
            guard fair.bFailures == 0 else {
                throw BenchError("fairness: \(fair.bFailures) of B's requests failed under fair shares")
            }
            results += [
                BenchResult(
                    name: "fairness.\(load.rawValue).b.p99" + suffix, ours: fair.bP99 * 1000,
                    reference: 3 * alone.bP99 * 1000 + 20, unit: "ms", higherIsBetter: false,
                    n: fair.bLatencies.count),
                BenchResult(
                    name: "fairness.\(load.rawValue).a.share" + suffix, ours: fair.aRate, reference: aAlone.aRate,
                    unit: "requests/s", higherIsBetter: true, n: fair.aRequests),
            ]
        }
        return results
    }

    /// One phase on a fresh table of ``fairnessRows`` rows: A's `load` (none: B alone) and B's requests (or none).
    private func fairPhase(_ database: String?, shares: FairShares, load: FairLoad?, b: Bool) async throws
        -> FairPhase
    {
        let location: DatabaseLocation
        if let database {
            try await Self.resetPostgres(database)
            location = .postgres(url: database)
        } else {
            let file = path("fairness-\(UUID().uuidString)")
            try await BenchServer.seed(path: file, rows: Self.fairnessRows)
            location = .sqlite(path: file)
        }
        return try await BenchServer.run(location, authenticated: true, fairShares: shares) { server in
            if let database { try await Self.seedPostgres(database, rows: Self.fairnessRows) }
            return try await Self.fairLoads(server.url, load: load, b: b)
        }
    }

    /// A's and B's requests at `url` for ``fairnessPhase``.
    private static func fairLoads(_ url: URL, load: FairLoad?, b: Bool) async throws -> FairPhase {
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = 40
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(connectionPool: pool))
        let (tokenA, tokenB) = (
            try await makeHS256Token(subject: "user-a", secret: BenchServer.secret),
            try await makeHS256Token(subject: "user-b", secret: BenchServer.secret)
        )
        let deadline = ContinuousClock.now + fairnessPhase
        do {
            async let aRequests = loadA(http, url, load, token: tokenA, until: deadline)
            async let bRequests = b ? requestsB(http, url, token: tokenB, until: deadline) : ([], 0)
            let (a, (latencies, failures)) = try await (aRequests, bRequests)
            try await http.shutdown()
            return FairPhase(
                bLatencies: latencies, bFailures: failures, aRequests: a, seconds: Measure.seconds(fairnessPhase))
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    /// A's 32 connections, each sending its load until `deadline`: how many requests were answered 2xx (none without
    /// a load).
    private static func loadA(
        _ http: HTTPClient, _ url: URL, _ load: FairLoad?, token: String, until deadline: ContinuousClock.Instant
    ) async throws -> Int {
        guard let load else { return 0 }
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for connection in 0..<32 {
                group.addTask {
                    var answered = 0
                    var round = 0
                    while ContinuousClock.now < deadline {
                        let request = fairRequest(url, load, token: token, connection: connection, round: round)
                        round += 1
                        let response = try await http.execute(request, timeout: .seconds(60))
                        _ = try await response.body.collect(upTo: 1 << 26)
                        if (200..<300).contains(response.status.code) { answered += 1 }
                    }
                    return answered
                }
            }
            return try await group.reduce(0, +)
        }
    }

    /// One of A's requests: a 1,000-row page (each connection walks the table), or a batch of 500 new rows.
    private static func fairRequest(_ url: URL, _ load: FairLoad, token: String, connection: Int, round: Int)
        -> HTTPClientRequest
    {
        var request: HTTPClientRequest
        switch load {
        case .pages:
            let skip = ((connection + round) % (fairnessRows / 1000)) * 1000
            request = HTTPClientRequest(
                url: url.appendingPathComponent("tables/TodoItem").absoluteString + "?$top=1000&$skip=\(skip)")
        case .batches:
            request = HTTPClientRequest(url: url.appendingPathComponent("batch").absoluteString)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            let operations = (0..<500).map { index in
                #"{"method":"POST","url":"tables/TodoItem","body":{"id":"a-\#(connection)-\#(round)-\#(index)","text":"Task \#(index)","complete":false}}"#
            }
            request.body = .bytes(ByteBuffer(string: #"{"requests":["# + operations.joined(separator: ",") + "]}"))
        }
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        return request
    }

    /// B's requests one after another until `deadline`: a 10-row read, then a one-row insert. Each one's seconds, and
    /// how many were not answered 2xx.
    private static func requestsB(
        _ http: HTTPClient, _ url: URL, token: String, until deadline: ContinuousClock.Instant
    )
        async throws -> ([Double], Int)
    {
        var latencies: [Double] = []
        var failures = 0
        var index = 0
        while ContinuousClock.now < deadline {
            let read = HTTPClientRequest(url: url.appendingPathComponent("tables/TodoItem").absoluteString + "?$top=10")
            var write = HTTPClientRequest(url: url.appendingPathComponent("tables/TodoItem").absoluteString)
            write.method = .POST
            write.headers.add(name: "Content-Type", value: "application/json")
            write.body = .bytes(ByteBuffer(string: #"{"id":"b-\#(index)","text":"mine","complete":false}"#))
            index += 1
            for var request in [read, write] {
                request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                request.headers.add(name: "Authorization", value: "Bearer \(token)")
                var status: UInt = 0
                latencies.append(
                    try await Measure.seconds {
                        let response = try await http.execute(request, timeout: .seconds(60))
                        _ = try await response.body.collect(upTo: 1 << 20)
                        status = response.status.code
                    })
                if !(200..<300).contains(status) { failures += 1 }
            }
        }
        return (latencies, failures)
    }
}
