import Foundation
import GRDB
import OfflineSync
import TestSupport

/// The cases `--link` runs over a shaped link (issue 17): each beside the least time the link allows for what it
/// moved — the round trips the operation needs at the least × RTT, plus the bytes that crossed the proxy /
/// bandwidth — so a ratio far below 1 is time lost to round trips or to bytes.
extension Cases {
    /// Makes a client on a new store whose requests cross the case's link.
    typealias Device = @Sendable () async throws -> SyncClient

    /// The largest page the link cases' server gives (its `pageSize` and `maxTop`), which is also the client's
    /// default `maxPullPageSize`: a pull of N rows needs at least N / 10,000 round trips.
    static let linkPageSize = 10_000

    /// `push.batch@LINK` or `push.sequential@LINK`: 1,000 queued inserts pushed through the link, in batches
    /// (`POST /batch`, from the first operation) or one request per operation (the v2 wire). Least round trips:
    /// one (a batch holds 500 operations, but nothing forbids a larger one).
    func linkPush(_ link: LinkProfile, batched: Bool) async throws -> BenchResult {
        let count = quick ? 200 : 1000
        let name = batched ? "push.batch" : "push.sequential"
        return try await overLink(link, name: name, rows: 0, n: count, batchPush: batched ? .always : .never) {
            run, device in
            let client = try await device()
            try await client.syncTable("TodoItem", of: BenchItem.self).insert(
                contentsOf: (0..<count).map { BenchItem(id: "l\(run)-\($0)", text: "Task \($0)", complete: false) })
            return try await Measure.overLink(roundTrips: 1) {
                let pushed = try await client.push().pushedCount
                guard pushed == count else { throw BenchError("push over \(link.name) pushed \(pushed) of \(count)") }
            }
        }
    }

    /// `pull.initial@LINK` (compressed responses, the server's default) or `pull.initial.plain@LINK` (the server
    /// compresses nothing): a client pulls every row of the table through the link.
    func linkPull(_ link: LinkProfile, rows: Int, compressing: Bool) async throws -> BenchResult {
        let name = compressing ? "pull.initial" : "pull.initial.plain"
        return try await overLink(link, name: name, rows: rows, n: rows, compressing: compressing) { _, device in
            let table = try await device().syncTable("TodoItem", of: BenchItem.self)
            return try await Measure.overLink(roundTrips: Self.pages(rows)) {
                try await Self.expect(table.pull(queryID: "all").appliedCount, rows, "pull over \(link.name)")
            }
        }
    }

    /// `sync.firstrun@LINK`: a new device's first launch — it opens a new store and a client and syncs the table
    /// (a pull, with its check for pending operations) — timed from opening the store until every row is local.
    func linkFirstRun(_ link: LinkProfile, rows: Int) async throws -> BenchResult {
        try await overLink(link, name: "sync.firstrun", rows: rows, n: rows) { _, device in
            try await Measure.overLink(roundTrips: Self.pages(rows)) {
                let table = try await device().syncTable("TodoItem", of: BenchItem.self)
                try await Self.expect(table.pull(queryID: "all").appliedCount, rows, "first run over \(link.name)")
            }
        }
    }

    /// `sync.catchup@LINK`: a device that had every row comes back after a day offline with 1,000 local edits,
    /// while another device changed 5,000 other rows on the server; timed: its push, then the incremental pull
    /// of the table (the 5,000 changes and its own 1,000 rows with their new versions). Least round trips: one for
    /// the push, one for the pull's 6,000 rows.
    func linkCatchUp(_ link: LinkProfile, rows: Int) async throws -> BenchResult {
        let (edits, changes) = quick ? (200, 1000) : (1000, 5000)
        return try await overLink(link, name: "sync.catchup", rows: rows, n: edits + changes) { run, device in
            let client = try await device()
            let table = try client.syncTable("TodoItem", of: BenchItem.self)
            try await Self.expect(table.pull(queryID: "all").appliedCount, rows, "catch-up's first pull")
            // The other device's changes: rows of the second half, stamped later than anything the device has.
            try await BenchServer.changeRows(
                at: self.serverPath(forRun: run), from: rows / 2, count: changes, tag: "remote \(run)")
            for index in 0..<edits {
                try await table.update(
                    BenchItem(id: String(format: "item-%07d", index), text: "edited offline \(run)", complete: true))
            }
            return try await Measure.overLink(roundTrips: 2) {
                let pushed = try await client.push().pushedCount
                guard pushed == edits else { throw BenchError("catch-up pushed \(pushed) of \(edits)") }
                // Its own edits come back too (each has a new updatedAt), already stored in their new version.
                try await Self.expect(table.pull(queryID: "all").appliedCount, changes, "catch-up over \(link.name)")
            }
        }
    }

    /// The least requests a pull of `rows` needs: pages of the server's largest size, at least one.
    static func pages(_ rows: Int) -> Int { max(1, (rows + linkPageSize - 1) / linkPageSize) }

    static func expect(_ actual: Int, _ expected: Int, _ what: String) throws {
        guard actual == expected else { throw BenchError("\(what) applied \(actual) of \(expected)") }
    }

    /// The server file of a run of `overLink` (each run seeds its own).
    func serverPath(forRun run: Int) -> String { directory.appendingPathComponent("link-server-\(run).sqlite").path }

    /// Runs `measure` `repetitions` times, each against a server seeded with `rows` (pages of at most
    /// ``linkPageSize``) whose requests cross a new link proxy; `measure` makes its devices (clients on new stores,
    /// through the proxy) and returns its seconds and the reference of what crossed the link meanwhile. The result
    /// is the medians of both.
    private func overLink(
        _ link: LinkProfile, name: String, rows: Int, n: Int, batchPush: SyncClient.BatchPush = .whenOffered,
        compressing: Bool = true,
        _ measure: @escaping @Sendable (_ run: Int, _ device: @escaping Device) async throws -> LinkMeasurement
    ) async throws -> BenchResult {
        var runs: [LinkMeasurement] = []
        for run in 0..<repetitions {
            let serverPath = serverPath(forRun: run)
            try? FileManager.default.removeItem(atPath: serverPath)
            try await BenchServer.seed(path: serverPath, rows: rows)
            let measured = try await BenchServer.run(
                path: serverPath, pageSize: Self.linkPageSize, compressing: compressing
            ) { server in
                let proxy = try await FaultProxy(profile: link, upstreamPort: server.url.port ?? 0)
                let url = URL(string: "http://127.0.0.1:\(proxy.port)")!
                let measured = try await LinkMeasurement.$proxy.withValue((proxy, link)) {
                    try await measure(run) { try await client(url, store: "link", batchPush: batchPush) }
                }
                await proxy.stop()
                return measured
            }
            runs.append(measured)
        }
        return BenchResult(
            name: "\(name)@\(link.name)", ours: Measure.median(runs.map(\.seconds)),
            reference: Measure.median(runs.map(\.reference)), unit: "s", higherIsBetter: false, n: n)
    }
}

/// One timed part of a link case: its seconds, and the link's reference for the round trips it needs and the bytes
/// that crossed the proxy while it ran.
struct LinkMeasurement: Sendable {
    var seconds: Double
    var reference: Double

    /// The proxy and profile of the case being run.
    @TaskLocal static var proxy: (FaultProxy, LinkProfile)?
}

extension Measure {
    /// Times `body` and takes the bytes that crossed the case's proxy meanwhile.
    static func overLink(roundTrips: Int, _ body: () async throws -> Void) async throws -> LinkMeasurement {
        guard let (proxy, link) = LinkMeasurement.proxy else { throw BenchError("no link proxy") }
        let before = proxy.bytes
        let seconds = try await Measure.seconds(body)
        let after = proxy.bytes
        return LinkMeasurement(
            seconds: seconds,
            reference: link.reference(
                roundTrips: roundTrips, upBytes: after.up - before.up, downBytes: after.down - before.down))
    }
}
