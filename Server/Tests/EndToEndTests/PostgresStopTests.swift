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
            try await withLocalPostgres { postgres in
                try await postgres.start()
                let port = try freePort()
                let results = try await withServerProcess(
                    port: port, database: postgres.url,
                    options: ["--query-timeout", "\(Self.queryTimeout.components.seconds)"]
                ) { server in try await Self.stopAndStart(postgres, under: server) }
                // No write answered 201 is lost (a 503 may or may not have committed: its reply is what failed).
                try await withServerProcess(port: port, database: postgres.url) { _ in
                    let stored = Set(try await ProcessTests.ScaleOutTests.serverRows(port: port).keys)
                    let created = results.filter { $0.status == 201 }.map(\.id)
                    let lost = created.filter { !stored.contains($0) }
                    #expect(lost.isEmpty, "writes answered 201 but not stored: \(lost.prefix(5))")
                }
            }
        }

        /// Stops PostgreSQL for 2 s under 16 writers to `server`, checks what they were answered, and returns it.
        static func stopAndStart(_ postgres: LocalPostgres, under server: ServerProcess) async throws -> [Outcome] {
            let port = server.port

            // AsyncHTTPClient, not URLSession: on Linux URLSession spins a core per waiting request, which
            // would starve the server and PostgreSQL of the two cores CI has.
            var httpConfiguration = HTTPClient.Configuration()
            httpConfiguration.connectionPool = .init(
                idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
            let writing = Locked(true)
            async let outcomes = Self.write(http, port: port, while: writing)
            try await Task.sleep(for: .seconds(2))
            try await postgres.stop()
            try await Task.sleep(for: .seconds(2))
            try await postgres.start()
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
            let exit = await server.terminate(within: .seconds(10))
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
            return results
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
