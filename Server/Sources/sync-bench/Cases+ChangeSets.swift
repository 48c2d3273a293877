import Foundation
import OfflineSync
import TestSupport

/// Change sets (issue 49): what one atomic batch costs beside the writes sent one by one.
extension Cases {
    /// `push.set10` (loopback) or `push.set10@LINK`: 10 inserts made as one change set and pushed as one atomic batch,
    /// beside the reference — the same 10 inserts made one by one and pushed one request each (the v2 wire without
    /// batches, as every Azure Mobile Apps client does). Each repetition measures both on new clients of a new server;
    /// each client learns the server's batch offer before the timed push (a pull of the empty table).
    func pushSet(_ link: LinkProfile?) async throws -> BenchResult {
        let count = 10
        var sets: [Double] = []
        var singles: [Double] = []
        for run in 0..<repetitions {
            let serverPath = serverPath(forRun: run)
            try? FileManager.default.removeItem(atPath: serverPath)
            try await BenchServer.seed(path: serverPath, rows: 0)
            let (set, single) = try await BenchServer.run(path: serverPath, compressing: link != nil) { server in
                var url = server.url
                var proxy: FaultProxy?
                if let link {
                    proxy = try await FaultProxy(profile: link, upstreamPort: server.url.port ?? 0)
                    url = URL(string: "http://127.0.0.1:\(proxy?.port ?? 0)")!
                }
                let items = { (prefix: String) in
                    (0..<count).map { BenchItem(id: "\(prefix)\(run)-\($0)", text: "Line \($0)", complete: false) }
                }
                // One change set, one atomic batch.
                let setClient = try await client(url, store: "set", batchPush: .whenOffered)
                let setTable = try setClient.syncTable("TodoItem", of: BenchItem.self)
                try await setTable.pull(queryID: "offer")
                let setItems = items("s")
                try await setClient.changeSet { set in
                    for item in setItems { try set.insert(item, into: setTable) }
                }
                let set = try await Measure.seconds {
                    let result = try await setClient.push()
                    guard result.pushedCount == count, result.changeSetsPushed == 1 else {
                        throw BenchError("push.set pushed \(result.pushedCount) of \(count) as one set")
                    }
                }
                // The same writes one by one.
                let singleClient = try await client(url, store: "singles", batchPush: .never)
                let singleTable = try singleClient.syncTable("TodoItem", of: BenchItem.self)
                try await singleTable.pull(queryID: "offer")
                for item in items("o") { try await singleTable.insert(item) }
                let single = try await Measure.seconds {
                    let pushed = try await singleClient.push().pushedCount
                    guard pushed == count else { throw BenchError("push of singles pushed \(pushed) of \(count)") }
                }
                await proxy?.stop()
                return (set, single)
            }
            sets.append(set)
            singles.append(single)
        }
        return BenchResult(
            name: "push.set10" + (link.map { "@\($0.name)" } ?? ""), ours: Measure.median(sets),
            reference: Measure.median(singles), unit: "s", higherIsBetter: false, n: count)
    }
}
