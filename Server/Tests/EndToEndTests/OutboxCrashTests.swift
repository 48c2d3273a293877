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

/// The after-commit hook's outbox under a crash (issue 31): `sync-server --audit-log` (an after-commit hook that
/// appends each committed write to a file) is killed with SIGKILL in the middle of a burst of 1,000 writes by 8
/// writers, and started again; writers retry what failed. Every write answered 200/201, and every row's last
/// version in the database, must be in the log at least once. On SQLite and PostgreSQL.
///
/// Covers: writes committed whose reply was lost, writes recorded but not yet delivered, writes the killed instance had
/// leased for delivery (delivered again once the lease ends: PostgreSQL missed 114 writes in one run when the test
/// waited 30 s for a 60 s lease), writes delivered but not yet removed from the outbox (those show as repeats, which
/// at-least-once allows).
extension ProcessTests {
    @Suite struct OutboxCrashTests {
        static let writes = 1_000
        static let writers = 8

        @Test(.timeLimit(.minutes(3))) func sqliteDeliversEveryCommittedWriteAcrossAKill() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try await Self.burst(database: "sqlite:" + directory.appendingPathComponent("sync.sqlite").path)
        }

        @Test(.enabled(if: PostgresServer.isRequired), .timeLimit(.minutes(3)))
        func postgresDeliversEveryCommittedWriteAcrossAKill() async throws {
            try await PostgresServer.withDatabase { url in try await Self.burst(database: url) }
        }

        static func burst(database: String) async throws {
            let log = FileManager.default.temporaryDirectory.appendingPathComponent("audit-\(UUID()).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: log) }
            let port = try freePort()
            // A write the killed instance had leased is delivered again once its lease ends: 5 s, not 60.
            let options = ["--audit-log", log, "--after-commit-lease", "5"]
            let killed = try await ServerProcess(port: port, database: database, options: options)
            let http = HTTPClient.shared

            let acknowledged = Locked<Set<String>>([])  // "id version"
            let writing = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<writers {
                        group.addTask {
                            for index in stride(from: writer, to: writes, by: writers) {
                                if let answer = try await Self.write(index, http, port: port) {
                                    acknowledged.withLock { _ = $0.insert(answer) }
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            // The kill: once 300 writes were answered.
            let deadline = ContinuousClock.now + .seconds(60)
            while acknowledged.withLock({ $0.count }) < 300, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            await killed.kill()
            let answeredBeforeKill = acknowledged.withLock { $0.count }
            let loggedBeforeKill = try Self.logged(log).count
            try await withServerProcess(port: port, database: database, options: options) { _ in
                try await writing.value

                // Every row's last version, as the database holds it.
                var stored: Set<String> = []
                while true {
                    let page = try await E2EHTTP(port: port).send(
                        .GET, "/tables/TodoItem?__includedeleted=true&$top=100&$skip=\(stored.count)&$orderby=id")
                    let rows = page.body?.arrayValue ?? []
                    stored.formUnion(
                        rows.compactMap { row in row["version"]?.stringValue.map { "\(row["id"]!.stringValue!) \($0)" }
                        })
                    if rows.isEmpty { break }
                }
                let expected = acknowledged.withLock { $0 }.union(stored)
                var logged: [String] = []
                let logDeadline = ContinuousClock.now + .seconds(30)
                repeat {
                    try await Task.sleep(for: .milliseconds(100))
                    logged = try Self.logged(log)
                } while !expected.isSubset(of: Set(logged)) && ContinuousClock.now < logDeadline
                let missing = expected.subtracting(logged)
                print(
                    "outbox crash (\(database.hasPrefix("sqlite") ? "SQLite" : "PostgreSQL")): \(answeredBeforeKill) writes answered before SIGKILL, \(acknowledged.withLock { $0.count }) in all; \(stored.count) rows; \(logged.count) log lines (\(loggedBeforeKill) before SIGKILL), \(Set(logged).count) distinct, \(logged.count - Set(logged).count) repeats; \(missing.count) missing"
                )
                #expect(stored.count == (0..<writes).filter { !isUpdate($0) }.count)
                #expect(missing.isEmpty, "committed writes never delivered: \(missing.sorted().prefix(5))")
            }
        }

        /// Whether write `index` is an update: every fourth of a writer's.
        static func isUpdate(_ index: Int) -> Bool { (index / writers) % 4 == 3 }

        /// Write `index`: every fourth of a writer's an update of the row its writer inserted just before, the others inserts;
        /// tried again until answered (the server may be dead or starting). Returns "id version" when the write was
        /// answered 200/201, nil when an insert's reply was lost and its retry found the row (a 409).
        static func write(_ index: Int, _ http: HTTPClient, port: Int) async throws -> String? {
            let update = isUpdate(index)
            let id = "row-\(update ? index - writers : index)"
            var request = HTTPClientRequest(
                url: "http://127.0.0.1:\(port)/tables/TodoItem" + (update ? "/\(id)" : ""))
            request.method = update ? .PATCH : .POST
            request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
            request.headers.add(name: "Content-Type", value: "application/json")
            let body: JSONValue = update ? ["n": .int(Int64(index))] : ["id": .string(id), "n": .int(Int64(index))]
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                request.body = .bytes(Array(body.serializedData()))
                let answer: (status: UInt, body: ByteBuffer)
                do {
                    let response = try await http.execute(request, timeout: .seconds(10))
                    answer = (response.status.code, try await response.body.collect(upTo: 1 << 20))
                } catch {
                    // The server is dead or starting: the write may have committed or not; try again.
                    try await Task.sleep(for: .milliseconds(50))
                    continue
                }
                switch answer.status {
                case 200, 201:
                    let item = try JSONValue(parsing: String(buffer: answer.body))
                    return "\(id) \(item["version"]?.stringValue ?? "")"
                case 409 where !update: return nil
                case 503: break
                default: throw ProcessError("write \(index): \(answer.status) \(String(buffer: answer.body))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw ProcessError("write \(index) was never answered")
        }

        /// The log's writes as "id version", one per line (repeats kept).
        static func logged(_ path: String) throws -> [String] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
            return try text.split(separator: "\n").map { line in
                let entry = try JSONValue(parsing: String(line))
                return "\(entry["item"]?["id"]?.stringValue ?? "") \(entry["item"]?["version"]?.stringValue ?? "")"
            }
        }
    }
}
