import Foundation
import SyncCore
import TestSupport
import Testing

/// A new release opens the databases an older one left (issue 64). Each folder of `Fixtures/upgrade` is named by a
/// release's commit and was written by that release's `sync-server` (`make-fixture`): lists with members, items with
/// a tombstone and an attachment, per-user notes, and writes whose after-commit delivery was still pending, on
/// SQLite (with its attachments folder) and PostgreSQL (a `pg_dump`). The current server must answer every recorded
/// query the same, byte for byte once parsed: each table with tombstones, as each user, and a page after a pull's
/// cursor (a device's incremental pull goes on where it stopped); serve the attachment's bytes; be ready; and deliver
/// each pending write to the audit log.
@Suite(.serialized, .timeLimit(.minutes(3))) struct UpgradeTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/upgrade").standardizedFileURL
    /// The fixtures' folders, one per release (beside them: config.json and make-fixture).
    static let releases =
        (try? FileManager.default.contentsOfDirectory(
            at: fixtures, includingPropertiesForKeys: [.isDirectoryKey]))?
        .filter { (try? $0.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true }
        .map(\.lastPathComponent).sorted() ?? []

    /// Without a fixture the tests below would have no case, and pass without checking anything.
    @Test func thereIsAFixtureOfAnOlderRelease() {
        #expect(!Self.releases.isEmpty, "no release folder in \(Self.fixtures.path)")
    }

    @Test(arguments: releases) func theSQLiteDatabaseOfAnOlderReleaseIsServedTheSame(_ release: String) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("upgrade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.copyItem(
            at: Self.fixtures.appendingPathComponent("\(release)/sqlite"), to: folder)
        try await check(
            release, backend: "sqlite", database: "sqlite:" + folder.appendingPathComponent("sync.sqlite").path)
    }

    @Test(.enabled(if: PostgresServer.isRequired), arguments: releases)
    func thePostgreSQLDatabaseOfAnOlderReleaseIsServedTheSame(_ release: String) async throws {
        try await PostgresServer.withDatabase { database in
            let dump = Self.fixtures.appendingPathComponent("\(release)/postgres.sql").path
            let restored = try await runCommand(
                "/usr/bin/psql", ["-q", "-v", "ON_ERROR_STOP=1", "-f", dump, database], timeout: .seconds(60))
            try #require(restored.status == 0, "psql: \(restored.error)")
            try await check(release, backend: "postgres", database: database)
        }
    }

    func check(_ release: String, backend: String, database: String) async throws {
        let fixture = Self.fixtures.appendingPathComponent(release)
        let configuration = Self.fixtures.appendingPathComponent("config.json")
        let secret = try #require(
            try JSONValue(parsing: Data(contentsOf: configuration))["auth"]?["hs256Secret"]?.stringValue)
        var tokens: [String: String] = [:]
        for user in ["alice", "bob"] {
            let made = try await runCommand(
                Products.path("sync-server"), ["token", "--sub", user],
                environment: ["SYNC_AUTH_HS256_SECRET": secret])
            tokens[user] = made.output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let audit = FileManager.default.temporaryDirectory.appendingPathComponent("audit-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: audit) }
        let port = try freePort()
        try await withServerProcess(
            port: port, database: database,
            options: ["--config", configuration.path, "--audit-log", audit.path, "--after-commit-lease", "1"]
        ) { _ in
            func get(_ path: String, as user: String) async throws -> RawReply {
                try await RawConnection.exchange(
                    port: port,
                    "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: 2.0.0\r\n"
                        + "Authorization: Bearer \(tokens[user] ?? "")\r\nConnection: close\r\n\r\n")
            }
            #expect(try await get("/ready", as: "alice").status == 200)
            let expected = try JSONValue(
                parsing: Data(contentsOf: fixture.appendingPathComponent("expected-\(backend).json")))
            let answers = try #require(expected.arrayValue)
            #expect(answers.count == 10)
            for answer in answers {
                let (user, path) = (answer["user"]?.stringValue ?? "", answer["path"]?.stringValue ?? "")
                let reply = try await get(path, as: user)
                #expect(reply.status == 200, "\(user) \(path): \(reply)")
                #expect(reply.json == answer["body"], "\(user) \(path) is served otherwise")
            }
            let bytes = try Data(contentsOf: fixture.appendingPathComponent("attachment.bin"))
            let item = try await get("/tables/TodoItem/item-1", as: "bob")
            let hash = try #require(item.json?["file"]?.stringValue)
            let file = try await get("/tables/TodoItem/attachments/\(hash)", as: "bob")
            #expect(file.status == 200)
            #expect(file.body == bytes, "the attachment's bytes differ")

            // Every write whose delivery was pending is appended to the audit log once the server runs.
            let pending = try #require(
                try JSONValue(parsing: Data(contentsOf: fixture.appendingPathComponent("outbox.json")))[backend]?
                    .intValue)
            var delivered = 0
            let started = ContinuousClock.now
            while started.duration(to: .now) < .seconds(20) {
                let lines = (try? String(contentsOf: audit, encoding: .utf8))?.split(separator: "\n") ?? []
                delivered = Set(lines.compactMap { try? JSONValue(parsing: Data($0.utf8))["sequence"] }).count
                if delivered >= pending { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(delivered == Int(pending), "of \(pending) pending deliveries, \(delivered) reached the audit log")
        }
    }
}
