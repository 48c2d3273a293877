import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OfflineSync
import SyncCore
import SyncSQLite
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

extension Cases {
    /// `live.latency`: a write on device A until it shows in device B's watched query, both syncing
    /// automatically with the default options (B learns of it from `GET /changes`). The reference is the least
    /// that path needs: A's push delay and two round trips (A's push, B's pull), measured as `GET /health`.
    func liveLatency() async throws -> [BenchResult] {
        let samples = quick ? 40 : 200
        let serverPath = path("live")
        try await BenchServer.seed(path: serverPath, rows: 0)
        let (latencies, reference) = try await BenchServer.run(path: serverPath) { server in
            let options = AutoSyncOptions()
            var roundTrips: [Double] = []
            for _ in 0..<20 { roundTrips.append(try await Measure.seconds { try await httpRoundTrip(server.url) }) }
            let (a, b) = (try await client(server.url, store: "liveA"), try await client(server.url, store: "liveB"))
            let (todosA, todosB) = (
                try a.syncTable("TodoItem", of: BenchItem.self), try b.syncTable("TodoItem", of: BenchItem.self)
            )
            await a.startSyncing(pulling: [todosA.autoPull()], options: options)
            await b.startSyncing(pulling: [todosB.autoPull()], options: options)
            // B's watched query, as an app's list would follow it: when each item first showed.
            let seen = Locked<[String: ContinuousClock.Instant]>([:])
            let watching = Task {
                for try await items in todosB.observe(TableQuery()) {
                    let now = ContinuousClock.now
                    seen.withLock { seen in for item in items where seen[item.id] == nil { seen[item.id] = now } }
                }
            }
            defer { watching.cancel() }
            var latencies: [Double] = []
            for index in 0..<samples {
                let id = "live-\(index)"
                let started = ContinuousClock.now
                try await todosA.insert(BenchItem(id: id, text: "Task \(index)", complete: false))
                var shown: ContinuousClock.Instant?
                while shown == nil {
                    guard started.duration(to: .now) < .seconds(10) else {
                        throw BenchError("item \(id) did not reach device B within 10 s")
                    }
                    try await Task.sleep(for: .milliseconds(2))
                    shown = seen.withLock { $0[id] }
                }
                latencies.append(Measure.seconds(started.duration(to: shown!)))
                // Writes a user makes are spaced irregularly: 50–500 ms apart here, so that samples meet the
                // devices in every phase of their own syncs (a fixed gap would always meet the same one).
                try await Task.sleep(for: .milliseconds(50 + (index * 7919) % 450))
            }
            await a.stopSyncing()
            await b.stopSyncing()
            return (latencies.sorted(), (Measure.seconds(options.pushDelay) + 2 * Measure.median(roundTrips)) * 1000)
        }
        func percentile(_ p: Double) -> Double {
            latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] * 1000
        }
        return [
            BenchResult(
                name: "live.latency.p50", ours: percentile(0.5), reference: reference, unit: "ms",
                higherIsBetter: false, n: samples),
            BenchResult(
                name: "live.latency.p99", ours: percentile(0.99), reference: reference, unit: "ms",
                higherIsBetter: false, n: samples),
        ]
    }

    /// `live.subscribers`: N idle `GET /changes` followers (a child process holds them) of this process's server:
    /// its resident memory with them beside the same N connections open and idle (and those beside none), its
    /// CPU while they wait, and the time from one write until every follower has its answer — beside the time
    /// the same connections take to get N `GET /health` answers at once (the HTTP work alone).
    func liveSubscribers() async throws -> [BenchResult] {
        let count = quick ? 200 : 1000
        let serverPath = path("subscribers")
        try await BenchServer.seed(path: serverPath, rows: 0)
        return try await BenchServer.run(path: serverPath) { server in
            let before = Self.megabytes("VmRSS")
            return try await withProcessDialog(
                CommandLine.arguments[0],
                ["--followers-child", server.url.absoluteString, "--followers", String(count)]
            ) { child in
                guard let connected = try await child.nextLine(), connected.hasPrefix("connected ") else {
                    throw BenchError("the followers child did not connect")
                }
                let connectedRSS = Self.megabytes("VmRSS")
                try await child.send("follow")
                guard try await child.nextLine() == "ready" else {
                    throw BenchError("the followers child did not start following")
                }
                // Idle: N requests held, nothing written.
                let with = Self.megabytes("VmRSS")
                let cpuBefore = Self.cpuSeconds()
                try await Task.sleep(for: .seconds(5))
                let idleCPU = (Self.cpuSeconds() - cpuBefore) / 5 * 100
                try await child.send("go")
                guard let done = try await child.nextLine(), done.hasPrefix("notified ") else {
                    throw BenchError("the followers child did not report")
                }
                let health = Double(connected.split(separator: " ")[1]) ?? 0
                let notified = Double(done.split(separator: " ")[1]) ?? 0
                return [
                    BenchResult(
                        name: "live.subscribers.notify", ours: notified * 1000, reference: health * 1000, unit: "ms",
                        higherIsBetter: false, n: count),
                    BenchResult(
                        name: "live.subscribers.rss", ours: with, reference: connectedRSS, unit: "MB",
                        higherIsBetter: false, n: count),
                    BenchResult(
                        name: "live.connections.rss", ours: connectedRSS, reference: before, unit: "MB",
                        higherIsBetter: false, n: count),
                    BenchResult(
                        name: "live.subscribers.cpu", ours: idleCPU, reference: nil, unit: "% of a core, idle",
                        higherIsBetter: false, n: count),
                ]
            }
        }
    }

    /// In the child: opens `count` connections and prints `connected SECONDS` (the time `count` concurrent
    /// `GET /health` took on them); after a line on standard input, sends a `GET /changes` on each and prints
    /// `ready`; after the next line, writes one row and prints `notified SECONDS`, the time until every follower
    /// had its answer.
    static func followersChild(url: URL, count: Int) async throws {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(
            idleTimeout: .seconds(300), concurrentHTTP1ConnectionsPerHostSoftLimit: count + 8)
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(90))
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            func get(_ path: String) async throws -> Data {
                let response = try await http.execute(
                    HTTPClientRequest(url: url.absoluteString + path), timeout: .seconds(90))
                guard response.status == .ok else { throw BenchError("GET \(path): \(response.status)") }
                return Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
            }
            func concurrently(_ path: String) async throws -> Double {
                try await Measure.seconds {
                    try await withThrowingDiscardingTaskGroup { group in
                        for _ in 0..<count { group.addTask { _ = try await get(path) } }
                    }
                }
            }
            _ = try await concurrently("/health")  // opens the connections
            let health = try await concurrently("/health")
            FileHandle.standardOutput.write(Data("connected \(health)\n".utf8))
            _ = try await offCooperativeThreads { readLine() }
            let first = try JSONValue(parsing: try await get("/changes?tables=TodoItem"))
            guard let token = first["token"]?.stringValue else { throw BenchError("no change token") }
            let answered = Locked<[ContinuousClock.Instant]>([])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        let body = try await get("/changes?tables=TodoItem&since=\(token)&wait=60")
                        guard (try JSONValue(parsing: body))["changed"] == ["TodoItem"] else {
                            throw BenchError("a follower was answered without the change")
                        }
                        answered.withLock { $0.append(.now) }
                    }
                }
                try await Task.sleep(for: .seconds(2))  // every request has reached the server
                FileHandle.standardOutput.write(Data("ready\n".utf8))
                _ = try await offCooperativeThreads { readLine() }
                let written = ContinuousClock.now
                var request = HTTPClientRequest(url: url.absoluteString + "/tables/TodoItem")
                request.method = .POST
                request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: #"{"id":"written","text":"wake","complete":false}"#))
                guard try await http.execute(request, timeout: .seconds(30)).status == .created else {
                    throw BenchError("the write failed")
                }
                try await group.waitForAll()
                let last = answered.withLock { $0.max() } ?? written
                print("notified \(Measure.seconds(written.duration(to: last)))")
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    /// The CPU time this process has used, user and system, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
