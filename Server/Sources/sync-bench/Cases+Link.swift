import Foundation
import OfflineSync

/// The cases `--link` runs over a shaped link (issue 17): each beside the least time the link allows for what it
/// moved — the round trips the operation needs at the least (one) × RTT, plus the bytes that crossed the proxy /
/// bandwidth — so a ratio far below 1 is time lost to round trips or to bytes.
extension Cases {
    /// `push.batch@LINK` or `push.sequential@LINK`: 1,000 queued inserts pushed through the link, in batches
    /// (`POST /batch`, from the first operation) or one request per operation (the v2 wire).
    func linkPush(_ link: LinkProfile, batched: Bool) async throws -> BenchResult {
        let count = quick ? 200 : 1000
        let name = batched ? "push.batch" : "push.sequential"
        return try await overLink(link, name: name, rows: 0, n: count, batchPush: batched ? .always : .never) {
            client, run in
            try await client.syncTable("TodoItem", of: BenchItem.self).insert(
                contentsOf: (0..<count).map { BenchItem(id: "l\(run)-\($0)", text: "Task \($0)", complete: false) })
            var result: PushResult?
            let seconds = try await Measure.seconds { result = try await client.push() }
            guard result?.pushedCount == count else {
                throw BenchError("push over \(link.name) pushed \(result?.pushedCount ?? 0) of \(count)")
            }
            return seconds
        }
    }

    /// `pull.initial@LINK`: a new device pulls every row of the table through the link.
    func linkPull(_ link: LinkProfile, rows: Int) async throws -> BenchResult {
        try await overLink(link, name: "pull.initial", rows: rows, n: rows) { client, _ in
            let table = try client.syncTable("TodoItem", of: BenchItem.self)
            var summary: PullSummary?
            let seconds = try await Measure.seconds { summary = try await table.pull(queryID: "all") }
            guard summary?.appliedCount == rows else {
                throw BenchError("pull over \(link.name) applied \(summary?.appliedCount ?? 0) of \(rows)")
            }
            return seconds
        }
    }

    /// Runs `measure` (which returns the seconds it timed) `repetitions` times, each with a new client whose
    /// requests cross a new `LinkProxy` to a server seeded with `rows`; the result is the medians of those
    /// seconds and of the link's reference for the bytes each run moved.
    private func overLink(
        _ link: LinkProfile, name: String, rows: Int, n: Int, batchPush: SyncClient.BatchPush = .whenOffered,
        _ measure: @escaping @Sendable (_ client: SyncClient, _ run: Int) async throws -> Double
    ) async throws -> BenchResult {
        let serverPath = path("link")
        try await BenchServer.seed(path: serverPath, rows: rows)
        let (ours, reference) = try await BenchServer.run(path: serverPath) { server in
            var runs: [(seconds: Double, reference: Double)] = []
            for run in 0..<repetitions {
                let proxy = try await LinkProxy(profile: link, upstreamPort: server.url.port ?? 0)
                let client = try await client(
                    URL(string: "http://127.0.0.1:\(proxy.port)")!, store: "link", batchPush: batchPush)
                let seconds = try await measure(client, run)
                let bytes = proxy.bytes
                await proxy.stop()
                runs.append((seconds, link.reference(roundTrips: 1, upBytes: bytes.up, downBytes: bytes.down)))
            }
            return (Measure.median(runs.map(\.seconds)), Measure.median(runs.map(\.reference)))
        }
        return BenchResult(
            name: "\(name)@\(link.name)", ours: ours, reference: reference, unit: "s", higherIsBetter: false, n: n)
    }
}
