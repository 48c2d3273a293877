import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// What only PostgreSQL has to get right: several instances over one database, and a database that
/// is unreachable at startup or goes away at run time. (Every other behaviour test runs on both stores.)
///
/// The time limit names a hang: one whole-suite run (2026-11-28) never ended
/// `twoInstancesAddingTheSameColumnsAtOnceBothSucceed` (idle after 20 minutes; 230 s in the next run's suite, under
/// 2 s alone). A limit cannot end a task that never resumes, but the run then says which test waits. 3 minutes: the
/// README's test command runs 6 cases at once and starts each limit when its case starts.
@Suite(.enabled(if: Backend.all.contains(.postgres)), .timeLimit(.minutes(3))) struct PostgresTests {
    /// Runs `body` with two servers (two stores, two caches) over one fresh PostgreSQL database.
    func withTwoInstances(
        tables: [TableConfiguration] = [],
        _ body: @Sendable (any TestClientProtocol, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await TestDatabase.with(.postgres) { database in
            let configuration = Fixture.configuration(database, tables: tables)
            try await buildApplication(configuration).test(.router) { first in
                try await buildApplication(configuration).test(.router) { second in
                    try await body(first, second)
                }
            }
        }
    }

    @Test func twoInstancesAddingTheSameColumnsAtOnceBothSucceed() async throws {
        try await withTwoInstances { first, second in
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for round in 0..<10 {
                    for (index, client) in [first, second].enumerated() {
                        group.addTask {
                            let item: JSONValue = [
                                "id": .string("r\(round)-\(index)"), "field\(round)": .int(Int64(round)),
                                "shared": "x",
                            ]
                            return try await client.send(.post, "/tables/TodoItem", json: item).status
                        }
                    }
                }
                for try await status in group { #expect(status == .created) }
            }
            let all = try await second.send(.get, "/tables/TodoItem?$top=100")
            #expect(all.items.count == 20)
            #expect(all.items.allSatisfy { $0["shared"] == "x" })
        }
    }

    @Test func anInstanceReadsFiltersAndTypesAColumnAnotherOneAdded() async throws {
        try await withTwoInstances { first, second in
            #expect(try await second.send(.get, "/tables/TodoItem").status == .ok)  // second caches the schema now
            let due = "2030-01-02T03:04:05.678Z"
            let inserted = try await first.send(.post, "/tables/TodoItem", json: ["id": "a", "due": .string(due)])
            #expect(inserted.status == .created)
            let listed = try await second.send(.get, "/tables/TodoItem")
            #expect(listed.items.map { $0["due"] } == [.string(due)])
            _ = try await first.send(.patch, "/tables/TodoItem/a", json: ["tag": "x"])
            let filtered = try await second.send(.get, "/tables/TodoItem?$filter=tag%20eq%20'x'&$select=tag")
            #expect(filtered.status == .ok)
            #expect(filtered.items.map { $0["tag"] } == ["x"])
            let widened = try await second.send(.patch, "/tables/TodoItem/a", json: ["count": 1])
            #expect(widened.status == .ok)
            _ = try await first.send(.patch, "/tables/TodoItem/a", json: ["count": 1.5])
            #expect(try await second.send(.get, "/tables/TodoItem/a").json?["count"] == 1.5)
        }
    }

    @Test func bookkeepingIsVersionedAndANewerDatabaseIsRefused() async throws {
        try await TestDatabase.with(.postgres) { database in
            guard case .postgres(let url) = database else { return }
            let configuration = Fixture.configuration(database)
            try await buildApplication(configuration).test(.router) { _ in }
            try await buildApplication(configuration).test(.router) { _ in }  // a second start applies nothing
            try await DatabaseURL(parsing: url).execute(
                #"INSERT INTO "__sync_migrations" ("version", "name") VALUES (99, 'from the future')"#)
            let error = await #expect(throws: TableStoreError.self) {
                try await buildApplication(configuration).test(.router) { _ in }
            }
            #expect(error?.description.contains("set up by a newer sync-server (bookkeeping version 99") == true)
        }
    }

    @Test func anUnreachableDatabaseStopsStartupWithOneLineNamingTheHostNotThePassword() async throws {
        var configuration = Fixture.configuration(.postgres(url: "postgres://sync:s3cret@127.0.0.1:1/sync"))
        configuration.databaseWaitLimit = .seconds(1)
        let started = ContinuousClock.now
        let error = await #expect(throws: TableStoreError.self) {
            try await buildApplication(configuration).test(.router) { _ in }
        }
        let message = error?.description ?? ""
        #expect(message.contains("cannot reach PostgreSQL at 127.0.0.1:1/sync"))
        #expect(!message.contains("s3cret"))
        #expect(!message.contains("\n"))
        // A guard against waiting forever, not a speed figure: other suites (the chaos test's processes)
        // may load both cores meanwhile; 19 s was seen under such load with a 1 s wait limit.
        #expect(started.duration(to: .now) < .seconds(90))
    }

    @Test func aLostDatabaseGives503AndTheServerRecoversWithoutARestart() async throws {
        let server = try #require(TestDatabase.postgresURL)
        try await TestDatabase.with(.postgres) { database in
            guard case .postgres(let url) = database else { return }
            let name = String(try #require(URLComponents(string: url)).path.dropFirst())
            var configuration = Fixture.configuration(database)
            configuration.databaseTimeout = .seconds(3)
            try await buildApplication(configuration).test(.router) { client in
                #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": "a"]).status == .created)
                // The database goes away: no new connections, and the pooled ones are cut.
                try await TestDatabase.administer(server, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS false")
                try await TestDatabase.administer(
                    server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)'")
                let down = try await client.send(.get, "/tables/TodoItem/a")
                #expect(down.status == .serviceUnavailable)
                #expect(down.error?.hasPrefix("The database is unavailable") == true)
                try await TestDatabase.administer(server, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS true")
                var status = HTTPResponse.Status.serviceUnavailable
                for _ in 0..<40 where status != .ok {
                    status = try await client.send(.get, "/tables/TodoItem/a").status
                    if status != .ok { try await Task.sleep(for: .milliseconds(250)) }
                }
                #expect(status == .ok)
            }
        }
    }
}

extension PostgresTests {
    @Test func aWriteThatOutlivesTheQueryTimeoutIsCancelledInTheDatabaseAndAnswered503() async throws {
        try await TestDatabase.with(.postgres) { database in
            guard case .postgres(let url) = database else { return }
            var configuration = Fixture.configuration(database)
            configuration.queryTimeout = .seconds(1)
            try await buildApplication(configuration).test(.router) { client in
                #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": "a"]).status == .created)
                // Another session holds the table for 6 s: the next write waits on its lock.
                let holder = Task {
                    try await DatabaseURL(parsing: url).execute(
                        "BEGIN", #"LOCK TABLE "todoitem" IN EXCLUSIVE MODE"#, "SELECT pg_sleep(6)", "COMMIT")
                }
                try await Task.sleep(for: .milliseconds(500))
                let started = ContinuousClock.now
                let blocked = try await client.send(.post, "/tables/TodoItem", json: ["id": "b"])
                let waited = started.duration(to: .now)
                #expect(blocked.status == .serviceUnavailable)
                #expect(
                    blocked.error
                        == "The database is unavailable: the request's database work took longer than the query timeout"
                )
                #expect(waited < .seconds(5), "answered after \(waited): the holder's 6 s, not the 1 s timeout")
                // PostgreSQL cancelled the write: once the lock is free, it does not go on and commit.
                try await holder.value
                #expect(try await client.send(.get, "/tables/TodoItem/b").status == .notFound)
            }
        }
    }
}
