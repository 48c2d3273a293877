import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore
import SyncSQLite
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A rolling restart that no client notices (issue 64). Two `sync-server` processes over one PostgreSQL database
/// behind nginx, configured by the shipped `deploy/nginx.conf` (only its upstreams and port changed). While `todo`
/// devices add items and sync, a raw HTTP client posts and pulls, and a follower long-polls `GET /changes` and pulls
/// what it is told of, every instance is stopped (SIGTERM), waited for and started again, one after the other.
///
/// Covers: requests that failed as a client saw them (a `todo` command that exited non-zero after the SDK's own
/// retries; a raw request answered other than 2xx, or cut), acknowledged writes lost or duplicated on the server,
/// and acknowledged writes the follower had not seen 10 s after the load stopped. Each must be 0.
extension ProcessTests {
    @Suite struct RollingRestartTests {
        static let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        /// The load and the restarts; `SYNC_ROLLING_SCALE=N` multiplies the devices, the raw writers and the rounds
        /// of restarts, for a larger run by hand.
        static let scale = ProcessInfo.processInfo.environment["SYNC_ROLLING_SCALE"].flatMap(Int.init) ?? 1
        static let devices = 3 * scale
        static let rawWriters = 4 * scale
        static let rounds = scale
        /// How long the load runs before, between and after the restarts.
        static let settle = Duration.seconds(2)

        @Test(.enabled(if: PostgresServer.isRequired), .timeLimit(.minutes(3)))
        func restartingEveryInstanceBehindTheBalancerLosesNothing() async throws {
            let nginx = try #require(Self.nginx, "nginx is not installed (apt-get install nginx; .ci/run does)")
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rolling-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            try await PostgresServer.withDatabase { database in
                let ports = [try freePort(), try freePort()]
                var instances: [ServerProcess] = []
                let balancer = try Balancer(nginx: nginx, upstreams: ports, folder: folder)
                let http = HTTPClient(eventLoopGroupProvider: .singleton)
                do {
                    for port in ports { instances.append(try await Self.start(port: port, database: database)) }
                    try await balancer.start()
                    try await run(balancer, http: http, folder: folder) { restarts in
                        for index in (0..<Self.rounds).flatMap({ _ in ports.indices }) {
                            try await Task.sleep(for: Self.settle)
                            let exited = await instances[index].terminate(within: .seconds(15))
                            #expect(exited != nil, "instance \(index + 1) did not exit within 15 s of SIGTERM")
                            instances[index] = try await Self.start(port: ports[index], database: database)
                            restarts.append(exited ?? .seconds(15))
                        }
                        try await Task.sleep(for: Self.settle)
                    }
                } catch {
                    print("RollingRestartTests: nginx said: \(balancer.errors)")
                    for instance in instances { await instance.stop() }
                    await balancer.stop()
                    try? await http.shutdown()
                    throw error
                }
                for instance in instances { await instance.stop() }
                await balancer.stop()
                try await http.shutdown()
            }
        }

        /// A `sync-server` on `port`, ready (`GET /ready` 200).
        static func start(port: Int, database: String) async throws -> ServerProcess {
            let server = try await ServerProcess(port: port, database: database, options: ["--shutdown-timeout", "5"])
            for _ in 0..<100 {
                if (try? await RawConnection.exchange(
                    port: port, "GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))?.status
                    == 200
                {
                    return server
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            await server.stop()
            throw ProcessError("the instance on port \(port) was not ready within 10 s")
        }

        /// Runs the load through `balancer` while `restart` restarts the instances, then checks it.
        func run(
            _ balancer: Balancer, http: HTTPClient, folder: URL,
            restart: (inout [Duration]) async throws -> Void
        ) async throws {
            let base = "http://127.0.0.1:\(balancer.port)"
            let loading = Locked(true)
            let following = Locked(true)
            async let raw = withThrowingTaskGroup(of: RawFigures.self) { group in
                for writer in 0..<Self.rawWriters {
                    group.addTask { try await Self.rawClient(writer, base, http: http, while: loading) }
                }
                return try await group.reduce(into: RawFigures()) { all, one in
                    all.sent += one.sent
                    all.failures += one.failures
                    all.acknowledged.formUnion(one.acknowledged)
                }
            }
            async let devices = Self.devices(base, folder: folder, while: loading)
            let follower = Follower()
            async let followed: Void = Self.follow(base, http: http, into: follower, while: following)
            var restarts: [Duration] = []
            do {
                try await restart(&restarts)
            } catch {
                loading.withLock { $0 = false }
                following.withLock { $0 = false }
                _ = try? await (raw, devices, followed)
                throw error
            }
            loading.withLock { $0 = false }
            let (rawFigures, deviceFigures) = try await (raw, devices)

            // Every device sends what it still holds; then the server's rows are the truth.
            var failures = rawFigures.failures + deviceFigures.failures
            for device in 0..<Self.devices {
                let last = try await Self.todo(["sync"], device: device, base: base, folder: folder)
                if last.status != 0 { failures.append("device \(device) final sync: \(last.output) \(last.error)") }
            }
            let rows = try await Self.rows(base, http: http, since: nil)
            var texts: [String: Int] = [:]
            for row in rows.values { texts[row.text, default: 0] += 1 }
            let acknowledged = rawFigures.acknowledged.union(deviceFigures.added)
            let lost = acknowledged.subtracting(texts.keys)
            let duplicated = texts.filter { $0.value > 1 }.keys
            // The follower pulls only when /changes tells it to: it must have seen every row by then.
            let ids = Set(rows.keys)
            var unseen = ids
            let waited = ContinuousClock.now
            while !unseen.isEmpty, waited.duration(to: .now) < .seconds(10) {
                try await Task.sleep(for: .milliseconds(100))
                unseen = ids.subtracting(await follower.seen)
            }
            following.withLock { $0 = false }
            try await followed
            let (polls, pulls, retries) = await (follower.polls, follower.pulls, follower.retries)

            print(
                """
                RollingRestartTests: \(restarts.count) restarts of 2 instances, SIGTERM to exit in \(restarts.map { "\(Int($0 / .milliseconds(1))) ms" }.joined(separator: ", ")); \
                requests sent: \(rawFigures.sent) raw (\(Self.rawWriters) writers), \(deviceFigures.commands) todo commands (\(Self.devices) \
                devices), \(polls) long polls and \(pulls) follower pulls; \
                failed as a client saw them: \(failures.count); acknowledged writes: \(acknowledged.count), \
                lost: \(lost.count), duplicated: \(duplicated.count); rows the follower missed: \(unseen.count); \
                follower requests cut or refused (then retried): \(retries)
                """)
            #expect(rawFigures.sent > 20 && deviceFigures.added.count > 5, "too little load to tell")
            if !failures.isEmpty || !lost.isEmpty {
                // A refused connection is tried on the next instance; what else nginx met explains a 502.
                let others = balancer.errors.split(separator: "\n").filter { !$0.contains("(111: Connection refused)") }
                print("RollingRestartTests: nginx's errors but refusals: \(others.suffix(10).joined(separator: "\n"))")
            }
            // Counts, not the collections: a failing run lists the first few, not thousands.
            let (failed, lostCount, duplicatedCount) = (failures.count, lost.count, duplicated.count)
            #expect(failed == 0, "\(failures.prefix(5))")
            #expect(lostCount == 0, "lost: \(lost.sorted().prefix(10))")
            #expect(duplicatedCount == 0, "duplicated: \(Array(duplicated).prefix(10))")
            #expect(unseen.count == 0, "the follower never saw \(unseen.sorted().prefix(10))")
        }

        struct RawFigures {
            var sent = 0
            var failures: [String] = []
            /// The texts of the rows the server answered 201 for.
            var acknowledged: Set<String> = []
        }

        /// Posts a row, and every fifth time pulls a page, until `loading` ends; no retry of its own.
        static func rawClient(_ writer: Int, _ base: String, http: HTTPClient, while loading: Locked<Bool>) async throws
            -> RawFigures
        {
            var figures = RawFigures()
            var index = 0
            while loading.withLock({ $0 }) {
                index += 1
                let text = "raw\(writer)-\(index)"
                var request = HTTPClientRequest(url: base + "/tables/TodoItem")
                request.method = .POST
                request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: #"{"id":"\#(text)","text":"\#(text)"}"#))
                figures.sent += 1
                do {
                    let response = try await http.execute(request, timeout: .seconds(30))
                    _ = try await response.body.collect(upTo: 1 << 20)
                    if response.status == .created {
                        figures.acknowledged.insert(text)
                    } else {
                        figures.failures.append("POST \(text): \(response.status.code)")
                    }
                } catch {
                    figures.failures.append("POST \(text): \(error)")
                }
                if index % 5 == 0 {
                    figures.sent += 1
                    var pull = HTTPClientRequest(url: base + "/tables/TodoItem?$top=20&$orderby=updatedAt%20desc")
                    pull.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                    do {
                        let response = try await http.execute(pull, timeout: .seconds(30))
                        _ = try await response.body.collect(upTo: 1 << 20)
                        if response.status != .ok { figures.failures.append("GET: \(response.status.code)") }
                    } catch {
                        figures.failures.append("GET: \(error)")
                    }
                }
            }
            return figures
        }

        struct DeviceFigures {
            var commands = 0
            var failures: [String] = []
            /// The texts of the items added (each acknowledged by its device's store, then pushed by a sync).
            var added: Set<String> = []
        }

        /// Each device adds an item and syncs, over and over, until `loading` ends.
        static func devices(_ base: String, folder: URL, while loading: Locked<Bool>) async throws -> DeviceFigures {
            try await withThrowingTaskGroup(of: DeviceFigures.self) { group in
                for device in 0..<Self.devices {
                    group.addTask {
                        var figures = DeviceFigures()
                        var index = 0
                        while loading.withLock({ $0 }) {
                            index += 1
                            let text = "device\(device)-\(index)"
                            for arguments in [["add", text], ["sync"]] {
                                figures.commands += 1
                                let result = try await Self.todo(arguments, device: device, base: base, folder: folder)
                                if result.status != 0 {
                                    figures.failures.append(
                                        "device \(device) \(arguments.joined(separator: " ")): \(result.output) \(result.error)"
                                    )
                                } else if arguments[0] == "add" {
                                    figures.added.insert(text)
                                }
                            }
                        }
                        return figures
                    }
                }
                return try await group.reduce(into: DeviceFigures()) { all, one in
                    all.commands += one.commands
                    all.failures += one.failures
                    all.added.formUnion(one.added)
                }
            }
        }

        static func todo(_ arguments: [String], device: Int, base: String, folder: URL) async throws -> CommandResult {
            try await runCommand(
                Products.path("todo"), arguments,
                environment: [
                    "TODO_STORE": folder.appendingPathComponent("device\(device).sqlite").path, "TODO_URL": base,
                ], timeout: .seconds(60))
        }

        /// What the follower saw.
        actor Follower {
            var seen: Set<String> = []
            var polls = 0
            var pulls = 0
            var retries = 0
            func saw(_ ids: some Sequence<String>) { seen.formUnion(ids) }
            func polled() { polls += 1 }
            func pulled() { pulls += 1 }
            func retried() { retries += 1 }
        }

        /// Long-polls `GET /changes` and, when told the table changed, pulls the rows changed since its last pull;
        /// a poll or pull that fails is tried again after 100 ms. Until `following` ends.
        static func follow(_ base: String, http: HTTPClient, into follower: Follower, while following: Locked<Bool>)
            async throws
        {
            var token: String?
            var cursor: String?
            while following.withLock({ $0 }) {
                do {
                    let since = token.map {
                        "&since=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
                    }
                    var request = HTTPClientRequest(url: base + "/changes?tables=TodoItem&wait=1" + (since ?? ""))
                    request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                    await follower.polled()
                    let response = try await http.execute(request, timeout: .seconds(30))
                    let body = try JSONValue(
                        parsing: Data(try await response.body.collect(upTo: 1 << 20).readableBytesView))
                    guard response.status == .ok, let next = body["token"]?.stringValue else {
                        throw ProcessError("GET /changes answered \(response.status.code)")
                    }
                    token = next
                    if since == nil || body["changed"]?.arrayValue?.isEmpty == false {
                        let rows = try await Self.rows(base, http: http, since: cursor)
                        await follower.pulled()
                        await follower.saw(rows.keys)
                        cursor = rows.values.map(\.updatedAt).max() ?? cursor
                    }
                } catch {
                    await follower.retried()
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }

        /// The table's rows (id → text and updatedAt), all, or those updated at or after `since`, page by page.
        static func rows(_ base: String, http: HTTPClient, since: String?) async throws
            -> [String: (text: String, updatedAt: String)]
        {
            var rows: [String: (text: String, updatedAt: String)] = [:]
            let filter = since.map { "&$filter=updatedAt%20ge%20datetimeoffset'\($0)'" } ?? ""
            var skip = 0
            while true {
                var request = HTTPClientRequest(
                    url: base + "/tables/TodoItem?$orderby=updatedAt,id&$top=50&$skip=\(skip)" + filter)
                request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                let response = try await http.execute(request, timeout: .seconds(30))
                let body = try JSONValue(
                    parsing: Data(try await response.body.collect(upTo: 8 << 20).readableBytesView))
                guard response.status == .ok, let page = body.arrayValue else {
                    throw ProcessError("GET /tables/TodoItem answered \(response.status.code)")
                }
                for row in page {
                    guard let id = row["id"]?.stringValue else { continue }
                    rows[id] = (row["text"]?.stringValue ?? "", row["updatedAt"]?.stringValue ?? "")
                }
                if page.count < 50 { return rows }
                skip += page.count
            }
        }
    }
}

/// nginx configured by `deploy/nginx.conf`, with its upstreams replaced by 127.0.0.1 ports and listening on a free
/// port of 127.0.0.1, its files in `folder`. Started in the foreground, stopped by its PID.
final class Balancer: Sendable {
    let port: Int
    let nginx: String
    let folder: URL
    let process = Locked<RunningProcess?>(nil)

    init(nginx: String, upstreams: [Int], folder: URL) throws {
        self.nginx = nginx
        self.folder = folder
        port = try freePort()
        let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../../deploy/nginx.conf")
        var text = try String(contentsOf: shipped, encoding: .utf8)
        let replacements = [
            (
                "server sync-server:8080 max_fails=0;",
                upstreams.map {
                    "server 127.0.0.1:\($0) max_fails=0;"
                }.joined(separator: "\n        ")
            ),
            ("listen 8080;", "listen 127.0.0.1:\(port);"),
            (
                "events {}",
                "daemon off;\npid \(folder.path)/nginx.pid;\nerror_log \(folder.path)/nginx-error.log;\nevents {}"
            ),
            (
                "http {",
                """
                http {
                    access_log off;
                    client_body_temp_path \(folder.path)/body;
                    proxy_temp_path \(folder.path)/proxy;
                    fastcgi_temp_path \(folder.path)/fastcgi;
                    uwsgi_temp_path \(folder.path)/uwsgi;
                    scgi_temp_path \(folder.path)/scgi;
                """
            ),
        ]
        for (old, new) in replacements {
            guard text.contains(old) else { throw ProcessError("deploy/nginx.conf no longer has '\(old)'") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        // Run as root (CI), the workers would take nobody's identity and could not write the folder.
        if getuid() == 0 { text = "user root;\n" + text }
        try text.write(to: folder.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
    }

    /// Starts nginx and returns once it accepts connections.
    func start() async throws {
        let running = await RunningProcess(
            nginx, ["-c", folder.appendingPathComponent("nginx.conf").path, "-p", folder.path])
        process.withLock { $0 = running }
        for _ in 0..<100 {
            if let probe = try? await RawConnection(port: port) {
                await probe.close()
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ProcessError("nginx did not listen on \(port): \(running.printed) \(errors)")
    }

    /// What nginx logged as errors (its upstream failures among them).
    var errors: String {
        (try? String(contentsOf: folder.appendingPathComponent("nginx-error.log"), encoding: .utf8)) ?? ""
    }

    func stop() async {
        if let running = process.withLock({ $0 }) { await running.stop() }
    }
}
