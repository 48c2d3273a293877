import Foundation
import OfflineSync
import SyncCore
import SyncSQLite
import SyncServer
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The tests that run `sync-server` processes under load, one after another: side by side on CI's two
/// cores, each would slow the others past their deadlines (and the PostgreSQL stop would meet few writes).
@Suite(.serialized, .timeLimit(.minutes(3))) enum ProcessTests {}

/// Two `sync-server` processes over one PostgreSQL database, written to and pulled from at once
/// (issue 7): the §5 cursor guarantee must hold across instances.
extension ProcessTests {
    @Suite struct ScaleOutTests {
        static let writers = 8
        static let rows = 2_000
        /// One update for every `updateEvery` inserts, of a row the same writer inserted.
        static let updateEvery = 2

        @Test(.enabled(if: PostgresServer.isRequired), .timeLimit(.minutes(3)))
        func twoInstancesOverOnePostgreSQLLoseAndRepeatNoRow() async throws {
            try await PostgresServer.withDatabase { databaseURL in
                let ports = [try freePort(), try freePort()]
                try await withServerProcess(port: ports[0], database: databaseURL) { _ in
                    try await withServerProcess(port: ports[1], database: databaseURL) { _ in

                        let clients = try await (0..<2).asyncMap { index in
                            try await PullingClient(ports: ports, first: index)
                        }
                        let writing = Locked(true)
                        async let pulls: [Int] = withThrowingTaskGroup(of: Int.self) { group in
                            for client in clients {
                                group.addTask {
                                    var pulls = 0
                                    while writing.withLock({ $0 }) {
                                        try await client.pull()
                                        pulls += 1
                                    }
                                    return pulls
                                }
                            }
                            return try await group.reduce(into: []) { $0.append($1) }
                        }
                        let started = ContinuousClock.now
                        let writes = try await Self.write(ports: ports)
                        let elapsed = started.duration(to: .now)
                        writing.withLock { $0 = false }
                        let pullsWhileWriting = try await pulls

                        // After the writers stop, one more incremental pull each catches the clients up.
                        for client in clients { try await client.pull() }
                        let truth = try await Self.serverRows(port: ports[0])
                        #expect(truth.count == Self.rows)
                        #expect(Set(truth.values.map(\.updatedAt)).count == truth.count, "two rows share an updatedAt")
                        for client in clients {
                            let held = try await client.localRows()
                            #expect(held.count == truth.count)
                            let stale = truth.filter { held[$0.key] != $0.value.version }.count
                            #expect(stale == 0, "rows a client misses or holds in an older version")
                            let repeated = await client.recorder.repeated.prefix(5)
                            #expect(repeated.isEmpty, "a pull returned a row version twice: \(repeated)")
                            #expect(await client.recorder.received >= held.count, "the recorder missed pages")
                        }
                        // The console of either instance shows the same table (issue 19): the counts, and the newest rows.
                        var newest: [[JSONValue]] = []
                        for port in ports {
                            let (status, overview) = try await HTTP().get(port: port, "/console/api/overview")
                            #expect(status == 200)
                            #expect(overview?["tables"]?.arrayValue?.first?["live"] == .int(Int64(Self.rows)))
                            let (_, page) = try await HTTP().get(port: port, "/console/api/tables/TodoItem?$top=20")
                            newest.append(page?["items"]?.arrayValue ?? [])
                        }
                        #expect(newest[0].count == 20 && newest[0] == newest[1])
                        let received = await clients.asyncMap { await $0.recorder.received }
                        let repeats = await clients.asyncMap { await $0.recorder.repeats }
                        print(
                            """
                            scale-out: \(writes.inserts) inserts + \(writes.updates) updates by \(Self.writers) writers over 2 \
                            instances in \(elapsed.formatted(.units(allowed: [.seconds], fractionalPart: .show(length: 1)))) (\(writes.sameMillisecond) writes started in a millisecond another \
                            write also started in); pulls while writing: \(pullsWhileWriting), rows received: \(received), \
                            rows checked: \(truth.count) × 2 clients, repeats: \(repeats)
                            """)
                    }
                }
            }
        }

        /// The writers: each inserts its share of the rows and updates some, spreading its requests over
        /// both instances.
        static func write(ports: [Int]) async throws -> (inserts: Int, updates: Int, sameMillisecond: Int) {
            let starts = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        let http = HTTP()
                        var starts: [Int64] = []
                        var mine: [String] = []
                        for step in 0..<(rows / writers) {
                            let port = ports[(writer + step) % 2]
                            starts.append(Int64(Date().timeIntervalSince1970 * 1000))
                            let id = "w\(writer)-\(step)"
                            let inserted = try await http.send(
                                "POST", port: port, "/tables/TodoItem",
                                json: ["id": .string(id), "step": .int(Int64(step))])
                            guard inserted == 201 else { throw ProcessError("insert \(id) answered \(inserted)") }
                            mine.append(id)
                            if step % updateEvery == updateEvery - 1, let target = mine.randomElement() {
                                starts.append(Int64(Date().timeIntervalSince1970 * 1000))
                                let updated = try await http.send(
                                    "PATCH", port: ports[(writer + step + 1) % 2], "/tables/TodoItem/\(target)",
                                    json: ["updatedBy": .int(Int64(writer)), "step": .int(Int64(step))])
                                guard updated == 200 else { throw ProcessError("update \(target) answered \(updated)") }
                            }
                        }
                        return starts
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let perMillisecond = Dictionary(grouping: starts, by: { $0 }).values
            let shared = perMillisecond.filter { $0.count > 1 }.reduce(0) { $0 + $1.count }
            return (rows, starts.count - rows, shared)
        }

        /// Every row the server holds (tombstones too): id → (version, updatedAt).
        static func serverRows(port: Int) async throws -> [String: (version: String, updatedAt: String)] {
            var rows: [String: (version: String, updatedAt: String)] = [:]
            var skip = 0
            while true {
                let (status, body) = try await HTTP().get(
                    port: port, "/tables/TodoItem?__includeDeleted=true&$orderby=id&$skip=\(skip)")
                guard status == 200, let items = body?.arrayValue else {
                    throw ProcessError("full read answered \(status)")
                }
                if items.isEmpty { return rows }
                for item in items {
                    guard let id = item["id"]?.stringValue else { continue }
                    rows[id] = (item["version"]?.stringValue ?? "", item["updatedAt"]?.stringValue ?? "")
                }
                skip += items.count
            }
        }
    }
}

/// An OfflineSync client (its own SQLite store) whose requests alternate between the instances, and
/// that records every row version its pulls receive.
final class PullingClient: Sendable {
    let client: SyncClient
    let recorder: Recorder
    let directory: URL

    init(ports: [Int], first: Int) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("scale-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let recorder = Recorder()
        var configuration = SyncClient.Configuration()
        configuration.transport = AlternatingTransport(ports: ports, first: first, recorder: recorder)
        configuration.pullPageSize = 200
        client = SyncClient(
            url: URL(string: "http://127.0.0.1:\(ports[first])")!,
            store: try SQLiteLocalStore(path: directory.appendingPathComponent("client.sqlite").path),
            configuration: configuration)
        self.recorder = recorder
    }

    func pull() async throws {
        try await client.syncTable("TodoItem").pull(queryID: "all")
    }

    /// The rows the client's store holds: id → version.
    func localRows() async throws -> [String: String] {
        let items = try await client.syncTable("TodoItem").items()
        return Dictionary(
            uniqueKeysWithValues: items.map { ($0["id"]?.stringValue ?? "", $0["version"]?.stringValue ?? "") })
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// Counts the row versions that pull responses carry, and those that came a second time.
actor Recorder {
    private var seen: Set<String> = []
    private(set) var received = 0
    private(set) var repeats = 0
    /// The first row versions that came again (`id|version`), for the failure's message.
    private(set) var repeated: [String] = []

    /// Records a page's rows; with `checkingRepeats`, a row version already seen in such a page is a repeat.
    func record(_ body: Data, checkingRepeats: Bool) {
        // A page is an array, or (the first of a pull, which asks the count) {"results": [...], "count": N}: reading
        // arrays alone saw almost none of the rows once pulls asked the count, and the repeat check saw nothing.
        guard let page = try? JSONValue(parsing: body), let items = page.arrayValue ?? page["results"]?.arrayValue
        else { return }
        for item in items {
            received += 1
            let key = "\(item["id"]?.stringValue ?? "")|\(item["version"]?.stringValue ?? "")"
            if checkingRepeats, !seen.insert(key).inserted {
                repeats += 1
                repeated.append(key)
            }
        }
    }
}

/// Sends each request to the next instance in turn, as a round-robin load balancer would.
struct AlternatingTransport: HTTPTransport {
    let ports: [Int]
    let next: Counter
    let recorder: Recorder
    let base = URLSessionTransport()

    init(ports: [Int], first: Int, recorder: Recorder) {
        self.ports = ports
        self.next = Counter(first)
        self.recorder = recorder
    }

    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        var request = request
        var components = URLComponents(url: request.url, resolvingAgainstBaseURL: false)!
        components.port = ports[await next.increment() % ports.count]
        request.url = components.url!
        let response = try await base.send(request)
        if request.method == "GET", response.status == 200 {
            // A page asked ahead (`$skip`, PullRunner's prefetch) starts with the row that ends the page before it, by
            // design, and is asked again when rows moved meanwhile: its rows count as received, not as repeats.
            let query = request.url.query ?? ""
            let askedAhead = query.contains("$skip") || query.contains("%24skip")
            await recorder.record(response.body, checkingRepeats: !askedAhead)
        }
        return response
    }
}

actor Counter {
    private var value: Int
    init(_ value: Int) { self.value = value }
    func increment() -> Int {
        defer { value += 1 }
        return value
    }
}

/// A small HTTP client for the writers.
struct HTTP {
    let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        return URLSession(configuration: configuration)
    }()

    func send(_ method: String, port: Int, _ path: String, json: JSONValue) async throws -> Int {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = json.serializedData()
        let (_, response) = try await session.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    func get(port: Int, _ path: String) async throws -> (Int, JSONValue?) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
        let (data, response) = try await session.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, try? JSONValue(parsing: data))
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
