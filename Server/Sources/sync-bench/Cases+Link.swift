import Foundation
import OfflineSync

/// The cases `--link` runs over a shaped link (issue 17): each beside the least time the link allows for what it
/// moved — the round trips the operation needs at the least (one) × RTT, plus the bytes that crossed the proxy /
/// bandwidth — so a ratio far below 1 is time lost to round trips or to bytes.
extension Cases {
    /// `push.sequential@LINK`: 1,000 queued inserts pushed through the link.
    func linkPush(_ link: LinkProfile) async throws -> BenchResult {
        let count = quick ? 200 : 1000
        let serverPath = path("linkpush")
        try await BenchServer.seed(path: serverPath, rows: 0)
        let (ours, reference) = try await BenchServer.run(path: serverPath) { server in
            var runs: [(Double, Double)] = []
            for run in 0..<repetitions {
                let proxy = try await LinkProxy(profile: link, upstreamPort: server.url.port ?? 0)
                let client = try await client(URL(string: "http://127.0.0.1:\(proxy.port)")!, store: "linkpush")
                try await client.syncTable("TodoItem", of: BenchItem.self).insert(
                    contentsOf: (0..<count).map { BenchItem(id: "l\(run)-\($0)", text: "Task \($0)", complete: false) })
                var result: PushResult?
                let seconds = try await Measure.seconds { result = try await client.push() }
                guard result?.pushedCount == count else {
                    throw BenchError("push over \(link.name) pushed \(result?.pushedCount ?? 0) of \(count)")
                }
                let bytes = proxy.bytes
                await proxy.stop()
                runs.append((seconds, link.reference(roundTrips: 1, upBytes: bytes.up, downBytes: bytes.down)))
            }
            return (Measure.median(runs.map(\.0)), Measure.median(runs.map(\.1)))
        }
        return BenchResult(
            name: "push.sequential@\(link.name)", ours: ours, reference: reference, unit: "s", higherIsBetter: false,
            n: count)
    }

    /// `pull.initial@LINK`: a new device pulls every row of the table through the link.
    func linkPull(_ link: LinkProfile, rows: Int) async throws -> BenchResult {
        let serverPath = path("linkpull")
        try await BenchServer.seed(path: serverPath, rows: rows)
        let (ours, reference) = try await BenchServer.run(path: serverPath) { server in
            var runs: [(Double, Double)] = []
            for _ in 0..<repetitions {
                let proxy = try await LinkProxy(profile: link, upstreamPort: server.url.port ?? 0)
                let client = try await client(URL(string: "http://127.0.0.1:\(proxy.port)")!, store: "linkpull")
                var summary: PullSummary?
                let table = try client.syncTable("TodoItem", of: BenchItem.self)
                let seconds = try await Measure.seconds { summary = try await table.pull(queryID: "all") }
                guard summary?.appliedCount == rows else {
                    throw BenchError("pull over \(link.name) applied \(summary?.appliedCount ?? 0) of \(rows)")
                }
                let bytes = proxy.bytes
                await proxy.stop()
                runs.append((seconds, link.reference(roundTrips: 1, upBytes: bytes.up, downBytes: bytes.down)))
            }
            return (Measure.median(runs.map(\.0)), Measure.median(runs.map(\.1)))
        }
        return BenchResult(
            name: "pull.initial@\(link.name)", ours: ours, reference: reference, unit: "s", higherIsBetter: false,
            n: rows)
    }
}
