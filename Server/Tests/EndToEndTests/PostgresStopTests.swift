import AsyncHTTPClient
import ChildProcesses
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore
import SyncSQLite
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// PostgreSQL stopped (`pg_ctl stop`, fast mode) and started again under 16 concurrent writers to a
/// `sync-server` process (issue 14, point 1). Before the fix, 2–8 requests that went out as the
/// database closed its connections never got an answer and kept the server from exiting on SIGTERM.
///
/// Covers: writes in flight as the database terminates their sessions, writes while it is down
/// (503 after the connection wait), writes after it is back (the pool reconnects); no write
/// answered 201 is lost, every request is answered within its deadline, SIGTERM ends the server.
extension ProcessTests {
    @Suite struct PostgresStopTests {
        static let writers = 16
        /// The server's limits in this test: the wait for a connection (the default) and the query timeout.
        static let connectionWait = Duration.seconds(5)
        static let queryTimeout = Duration.seconds(2)

        @Test(.enabled(if: LocalPostgres.isRequired), .timeLimit(.minutes(3)))
        func everyRequestIsAnsweredWhenPostgreSQLStopsUnderLoadAndTheServerRecovers() async throws {
            let postgres = try LocalPostgres()
            defer { postgres.remove() }
            try postgres.start()
            let port = try freePort()
            let server = try ServerProcess(
                port: port, database: postgres.url,
                options: ["--query-timeout", "\(Self.queryTimeout.components.seconds)"])
            defer { server.stop() }

            // AsyncHTTPClient, not URLSession: on Linux URLSession spins a core per waiting request, which
            // would starve the server and PostgreSQL of the two cores CI has.
            var httpConfiguration = HTTPClient.Configuration()
            httpConfiguration.connectionPool = .init(
                idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
            let writing = Locked(true)
            async let outcomes = Self.write(http, port: port, while: writing)
            try await Task.sleep(for: .seconds(2))
            try postgres.stop()
            try await Task.sleep(for: .seconds(2))
            try postgres.start()
            let restarted = ContinuousClock.now
            try await Task.sleep(for: .seconds(1))
            writing.withLock { $0 = false }
            let results = try await outcomes

            // Recovery: the first write after the restart that succeeds.
            var recovered: Duration?
            for attempt in 0..<120 where recovered == nil {
                let status = try? await Self.insert("after-\(attempt)", http, port: port)
                if status == 201 {
                    recovered = restarted.duration(to: .now)
                } else {
                    try await Task.sleep(for: .milliseconds(250))
                }
            }
            let exit = server.terminate(within: .seconds(10))
            try await http.shutdown()

            // A request's deadline: the wait for a connection, then the query's, and a second of grace
            // (5 s more allowed for a machine that other test suites load meanwhile).
            let deadline = Self.connectionWait + Self.queryTimeout + .seconds(1)
            let unanswered = results.filter { $0.status == nil }
            let late = results.filter { $0.elapsed > deadline + .seconds(5) }
            let statuses = Dictionary(grouping: results.compactMap(\.status), by: { $0 }).mapValues(\.count)
            let worst = results.map(\.elapsed).max() ?? .zero
            print(
                """
                postgres-stop: \(results.count) writes by \(Self.writers) writers; statuses \(statuses.sorted { $0.key < $1.key }); \
                unanswered \(unanswered.count); worst \(worst) (deadline \(deadline)); recovered \(recovered.map { "\($0)" } ?? "never") \
                after the restart; exit on SIGTERM \(exit.map { "\($0)" } ?? "never (killed)")
                """)
            #expect(unanswered.isEmpty, "requests with no answer: \(unanswered.prefix(5).map(\.id))")
            #expect(
                late.isEmpty,
                "requests answered after their deadline: \(late.prefix(5).map { "\($0.id) \($0.elapsed)" })")
            #expect(Set(statuses.keys).isSubset(of: [201, 503]), "statuses: \(statuses)")
            #expect((statuses[201] ?? 0) > 0)
            #expect(recovered != nil, "no write succeeded within 30 s of the restart")
            #expect(exit != nil, "the server did not exit within 10 s of SIGTERM")

            // No write answered 201 is lost (a 503 may or may not have committed: its reply is what failed).
            let restartedServer = try ServerProcess(port: port, database: postgres.url)
            defer { restartedServer.stop() }
            let stored = Set(try await ProcessTests.ScaleOutTests.serverRows(port: port).keys)
            let created = results.filter { $0.status == 201 }.map(\.id)
            let lost = created.filter { !stored.contains($0) }
            #expect(lost.isEmpty, "writes answered 201 but not stored: \(lost.prefix(5))")
        }

        /// What one write got: its status (nil: no answer) and how long the answer took.
        struct Outcome: Sendable {
            let id: String
            let status: Int?
            let elapsed: Duration
        }

        /// Inserts rows from `writers` concurrent writers until `writing` turns false.
        static func write(_ http: HTTPClient, port: Int, while writing: Locked<Bool>) async throws -> [Outcome] {
            try await withThrowingTaskGroup(of: [Outcome].self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var outcomes: [Outcome] = []
                        var step = 0
                        while writing.withLock({ $0 }) {
                            let id = "w\(writer)-\(step)"
                            let started = ContinuousClock.now
                            let status = try? await insert(id, http, port: port)
                            outcomes.append(Outcome(id: id, status: status, elapsed: started.duration(to: .now)))
                            step += 1
                        }
                        return outcomes
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
        }
    }
}

extension ProcessTests.PostgresStopTests {
    /// Inserts a row with `id`; returns the status (throws when no answer came within 30 s).
    static func insert(_ id: String, _ http: HTTPClient, port: Int) async throws -> Int {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/tables/TodoItem")
        request.method = .POST
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(Array(JSONValue.object(["id": .string(id)]).serializedData()))
        let response = try await http.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }
}

/// A PostgreSQL server of the test's own, in a temporary directory, that the test can stop and start
/// (the shared one of `.ci/with-postgres` serves the other tests meanwhile). As root, PostgreSQL runs
/// as the user `pgtest`, as in `.ci/with-postgres`.
///
/// The server runs as a child process, not through `pg_ctl start`: a daemon started that way keeps
/// the descriptors through which the test would learn that `pg_ctl` exited.
final class LocalPostgres {
    let directory: String
    let port: Int
    let binaries: String
    private var server: ChildProcess?
    var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    /// Where `initdb`, `pg_ctl` and `pg_isready` are: `pg_ctl`'s directory on PATH (links resolved), else
    /// Debian's newest `/usr/lib/postgresql/*/bin`.
    static let binaryDirectory: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates =
            path.split(separator: ":").map(String.init)
            + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .sorted { $0.compare($1, options: .numeric) == .orderedDescending }.map { "/usr/lib/postgresql/\($0)/bin" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: "\($0)/pg_ctl") }.map {
            URL(fileURLWithPath: "\($0)/pg_ctl").resolvingSymlinksInPath().deletingLastPathComponent().path
        }
    }()

    /// Whether to run: where PostgreSQL is installed, and always in CI (where its absence fails the test).
    static let isRequired: Bool = {
        if binaryDirectory != nil || ProcessInfo.processInfo.environment["CI"] != nil { return true }
        print("PostgresStopTests: skipped: no pg_ctl on PATH or in /usr/lib/postgresql/*/bin")
        return false
    }()

    static var runAs: [String] { getuid() == 0 ? ["/usr/sbin/runuser", "-u", "pgtest", "--"] : [] }

    /// Creates the database cluster (initdb); nothing runs yet.
    init() throws {
        binaries = try #require(Self.binaryDirectory, "PostgreSQL's binaries are missing (apt-get install postgresql)")
        port = try freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        if getuid() == 0 {
            _ = try? Self.run(["/usr/sbin/useradd", "--create-home", "pgtest"])
            try Self.run(["/bin/chown", "pgtest", directory])
        }
        try Self.run(Self.runAs + ["\(binaries)/initdb", "-D", "\(directory)/db", "-A", "trust", "-U", "postgres"])
        FileManager.default.createFile(atPath: "\(directory)/server.log", contents: nil)
    }

    /// Starts the server and waits (up to 30 s) until it accepts connections.
    func start() throws {
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(directory)/server.log"))
        log.seekToEndOfFile()
        let process = Self.process(
            Self.runAs + [
                "\(binaries)/postgres", "-D", "\(directory)/db", "-h", "127.0.0.1", "-p", "\(port)", "-k", directory,
                "-c", "fsync=off",
            ], output: log)
        try process.run()
        server = process
        let deadline = ContinuousClock.now + .seconds(30)
        while (try? Self.run(["\(binaries)/pg_isready", "-q", "-h", "127.0.0.1", "-p", "\(port)"])) == nil {
            guard process.isRunning, ContinuousClock.now < deadline else {
                throw E2EError(
                    "PostgreSQL did not start: \((try? String(contentsOfFile: "\(directory)/server.log", encoding: .utf8)) ?? "")"
                )
            }
            usleep(100_000)
        }
    }

    /// `pg_ctl stop` in its default (fast) mode: sessions are terminated, their transactions rolled back.
    func stop() throws {
        try Self.run(Self.runAs + ["\(binaries)/pg_ctl", "-D", "\(directory)/db", "-w", "-m", "fast", "stop"])
        server?.waitUntilExit()
        server = nil
    }

    /// Stops the server at once when it runs and deletes its files.
    func remove() {
        if server != nil {
            _ = try? Self.run(Self.runAs + ["\(binaries)/pg_ctl", "-D", "\(directory)/db", "-m", "immediate", "stop"])
            server?.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a command to completion; throws with its output when it fails. (The output goes through a
    /// file, not a pipe: the server `pg_ctl start` leaves running would hold a pipe open.)
    static func run(_ arguments: [String]) throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("pg-command-\(UUID().uuidString)")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let output = try FileHandle(forWritingTo: log)
        defer { try? output.close() }
        let process = Self.process(arguments, output: output)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw E2EError("\(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(text)")
        }
    }

    /// A process for `arguments` (the executable first), its output and errors to `output`, no input.
    static func process(_ arguments: [String], output: FileHandle) -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        return process
    }
}
