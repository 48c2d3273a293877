import Foundation
import SyncCore
import SyncServer
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `GET /changes` across two `sync-server` processes over one PostgreSQL database (issue 16, point 4): a
/// follower of instance A is woken by a write served by instance B (LISTEN/NOTIFY), also after A's listening
/// connection was cut — a missed notice wakes every follower rather than being lost.
extension ProcessTests {
    @Suite struct ChangeRelayTests {
        @Test(.enabled(if: PostgresServer.isRequired), .timeLimit(.minutes(2)))
        func aWriteOnOneInstanceWakesAFollowerOfTheOther() async throws {
            try await PostgresServer.withDatabase { databaseURL in
                let ports = [try freePort(), try freePort()]
                try await withServerProcess(port: ports[0], database: databaseURL) { _ in
                    try await withServerProcess(port: ports[1], database: databaseURL) { _ in
                        let http = HTTP()
                        let (a, b) = (ports[0], ports[1])

                        var latencies: [Duration] = []
                        for round in 0..<3 {
                            if round == 2 {
                                // Cut both instances' listening connections: they listen again within a second.
                                try await DatabaseURL(parsing: databaseURL).execute(
                                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
                                )
                                try await Task.sleep(for: .seconds(1.5))
                            }
                            let token = try await Self.quietToken(port: a, http: http)
                            let started = ContinuousClock.now
                            async let woken = http.get(port: a, "/changes?tables=TodoItem&since=\(token)&wait=20")
                            try await Task.sleep(for: .milliseconds(100))
                            #expect(
                                try await http.send(
                                    "POST", port: b, "/tables/TodoItem", json: ["text": .string("round \(round)")])
                                    == 201)
                            let (status, body) = try await woken
                            latencies.append(started.duration(to: .now) - .milliseconds(100))
                            #expect(status == 200)
                            #expect(
                                body?["changed"] == ["TodoItem"],
                                "round \(round): a write on B did not wake A's follower")
                        }
                        print(
                            "change-relay: B's write → A's follower answered after \(latencies) (the last after a cut)")
                    }
                }
            }
        }

        /// A token from `port` after which nothing is pending: at startup, and after the listening connection
        /// was cut, an instance wakes every follower once (it may have missed notices), so the test asks until a
        /// one-second wait passes with no change (at most 20 times).
        static func quietToken(port: Int, http: HTTP) async throws -> String {
            var token = try #require(
                try await http.get(port: port, "/changes?tables=TodoItem").1?["token"]?.stringValue)
            for _ in 0..<20 {
                let (_, body) = try await http.get(port: port, "/changes?tables=TodoItem&since=\(token)&wait=1")
                let next = try #require(body?["token"]?.stringValue)
                if body?["changed"] == [] { return next }
                token = next
            }
            throw ProcessError("instance on port \(port) kept reporting changes nobody wrote")
        }
    }
}
