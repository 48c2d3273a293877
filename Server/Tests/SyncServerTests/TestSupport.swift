import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncCore
import SyncSQL
import Testing

@testable import SyncServer

/// A response, with its body parsed as JSON when it is JSON.
struct Reply: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let text: String

    var json: JSONValue? { try? JSONValue(parsing: text) }
    var items: [JSONValue] { json?.arrayValue ?? json?["results"]?.arrayValue ?? [] }
    var ids: [String] { items.compactMap { $0["id"]?.stringValue } }
    var error: String? { json?["error"]?.stringValue }
    subscript(header: String) -> String? { headers[HTTPField.Name(header)!] }
}

extension TestClientProtocol {
    /// Sends a request with `ZUMO-API-VERSION: 2.0.0` (unless `versioned` is false) and a JSON body (typed
    /// `application/json` unless `headers` give another type).
    func send(
        _ method: HTTPRequest.Method, _ uri: String, json: JSONValue? = nil, body: String? = nil,
        headers: HTTPFields = [:], versioned: Bool = true
    ) async throws -> Reply {
        var headers = headers
        if versioned { headers[HTTPField.Name("ZUMO-API-VERSION")!] = "2.0.0" }
        var buffer: ByteBuffer?
        if let text = json?.serialized() ?? body {
            if headers[.contentType] == nil { headers[.contentType] = "application/json" }
            buffer = ByteBuffer(string: text)
        }
        return try await execute(uri: uri, method: method, headers: headers, body: buffer) { response in
            Reply(status: response.status, headers: response.headers, text: String(buffer: response.body))
        }
    }
}

/// A directory that lives for one test.
struct TemporaryDirectory: ~Copyable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("offlinesync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var databasePath: String { url.appendingPathComponent("sync.sqlite").path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A store the server tests run against: every behaviour test runs on both.
enum Backend: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite, postgres

    /// The backends to test: both; PostgreSQL only where a server is given (see ``TestDatabase``).
    static let all: [Backend] =
        TestDatabase.postgresURL != nil || ProcessInfo.processInfo.environment["CI"] != nil ? allCases : [.sqlite]

    var testDescription: String { rawValue }
}

/// A fresh, empty database for one test: an SQLite file in a temporary directory, or a database of
/// its own on the PostgreSQL server that `SYNC_TEST_POSTGRES_URL` names (`.ci/with-postgres` starts
/// one); removed afterwards.
enum TestDatabase {
    /// The PostgreSQL server for tests. Without one, PostgreSQL tests are skipped with a printed reason,
    /// except in CI (`CI` set), where their absence fails the run.
    static let postgresURL: String? = {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment["SYNC_TEST_POSTGRES_URL"], !url.isEmpty { return url }
        guard environment["CI"] == nil else { return nil }  // CI runs them anyway, and they fail
        print(
            "SyncServerTests: PostgreSQL tests skipped: SYNC_TEST_POSTGRES_URL is not set "
                + "(run `.ci/with-postgres swift test` to include them)")
        return nil
    }()

    static func with<T>(_ backend: Backend, _ body: (DatabaseLocation) async throws -> T) async throws -> T {
        switch backend {
        case .sqlite:
            let directory = try TemporaryDirectory()
            return try await body(.sqlite(path: directory.databasePath))
        case .postgres:
            let server = try #require(
                postgresURL, "SYNC_TEST_POSTGRES_URL is not set: CI runs the tests through .ci/with-postgres")
            try await postgresSlots.acquire()
            defer { Task { await postgresSlots.release() } }
            let name = "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try await administer(server, "CREATE DATABASE \"\(name)\"")
            let watchdog = Task { await reportSessions(server, database: name, after: Self.stuckAfter) }
            defer { watchdog.cancel() }
            do {
                let result = try await body(.postgres(url: try url(server, database: name)))
                try await administer(server, "DROP DATABASE \"\(name)\" WITH (FORCE)")
                return result
            } catch {
                // PostgreSQL's errors describe themselves only when reflected.
                print("TestDatabase: test on \(name) failed: \(String(reflecting: error))")
                try? await administer(server, "DROP DATABASE \"\(name)\" WITH (FORCE)")
                throw error
            }
        }
    }

    /// How many PostgreSQL tests run at once. Swift Testing starts nearly every test together (over a hundred
    /// on PostgreSQL), and each holds a few connections — its pool, the change relay's listener — which together
    /// passed the test server's `max_connections`; two cores gain nothing from more than a few dozen anyway.
    private static let postgresSlots = Slots(24)

    /// How long a test on PostgreSQL may run before ``reportSessions(_:database:after:)`` prints what its database's
    /// sessions are doing: the longest such case took under 60 s of its own (2026-11-29), and the suites' hang guards
    /// end a case at 3 minutes.
    static let stuckAfter = Duration.seconds(150)

    /// After `delay` (unless cancelled first), prints the sessions of `database` — state, wait, transaction age and
    /// query — and the locks they wait for: two whole-suite runs once hung with the process idle in PostgreSQL cases
    /// (issue 63), and this tells a wait in the database from a task that never resumed. Bounded at 10 s itself.
    static func reportSessions(_ server: String, database: String, after delay: Duration) async {
        guard (try? await Task.sleep(for: delay)) != nil else { return }
        let sessions = """
            SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS transaction_age,
                pg_blocking_pids(pid) AS blocked_by, left(query, 300) AS query
            FROM pg_stat_activity WHERE datname = '\(database)'
            """
        let report = try? await abandoning(after: .seconds(10), throwing: { CancellationError() }) {
            try await DatabaseURL(parsing: server).rows(sessions)
        }
        print(
            "TestDatabase: a test on \(database) still runs after \(delay); its sessions:\n"
                + (report.map { $0.isEmpty ? "(none)" : $0.joined(separator: "\n") } ?? "(not read within 10 s)"))
    }

    /// The server's URL with another database.
    static func url(_ server: String, database: String) throws -> String {
        var components = try #require(URLComponents(string: server))
        components.path = "/" + database
        return try #require(components.string)
    }

    /// Runs one statement on the server's own database.
    static func administer(_ server: String, _ sql: String) async throws {
        do {
            try await DatabaseURL(parsing: server).execute(sql)
        } catch {
            print("TestDatabase: \(sql) failed: \(String(reflecting: error))")
            throw error
        }
    }
}

enum Fixture {
    /// A configuration on `database`, listening on 127.0.0.1, any port.
    static func configuration(_ database: DatabaseLocation, tables: [TableConfiguration] = [])
        -> SyncServerConfiguration
    {
        var configuration = SyncServerConfiguration()
        configuration.port = 0
        configuration.database = database
        configuration.tables = tables
        configuration.databaseWaitLimit = .seconds(5)
        // The suites run side by side on two cores; a loaded machine must not turn slow writes into 503s.
        // (The query timeout has tests of its own, which set it short.)
        configuration.queryTimeout = .seconds(60)
        return configuration
    }

    /// Runs `body` against a server on a fresh database of `backend`.
    static func withServer<T: Sendable>(
        _ backend: Backend, tables: [TableConfiguration] = [], setup: TestingSetup = .router,
        configure: (inout SyncServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        try await TestDatabase.with(backend) { database in
            var configuration = configuration(database, tables: tables)
            configure(&configuration)
            let app = try await buildApplication(configuration)
            return try await app.test(setup, body)
        }
    }

    /// Runs `body` with the table store of `configuration`, prepared, opened beside any application's (the same file
    /// or database). `queryTimeout` bounds a PostgreSQL store's work per call (the server's default, 10 s, unless given).
    static func withTableStore(
        _ configuration: SyncServerConfiguration, queryTimeout: Duration = .seconds(10),
        _ body: @Sendable (any TableStore) async throws -> Void
    ) async throws {
        switch configuration.database {
        case .sqlite(let path):
            let store = try SQLiteTableStore(path: path)
            try await store.prepare(configuration.servedTables)
            try await body(store)
        case .postgres(let url):
            let store = try PostgresTableStore(url: url, queryTimeout: queryTimeout)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                try await store.prepare(configuration.servedTables)
                try await body(store)
                group.cancelAll()
            }
        }
    }

    static func table(
        _ name: String, softDelete: Bool = true, pageSize: Int = 50, maxTop: Int = 1000,
        columns: [String: SQLColumnType]? = nil
    ) -> TableConfiguration {
        // Test tables are well-formed by construction.
        try! TableConfiguration(
            name: name, softDelete: softDelete, pageSize: pageSize, maxTop: maxTop, columns: columns)
    }
}

/// A counting semaphore for async code: at most `count` holders at once, the others wait in order.
actor Slots {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = count }

    func acquire() async {
        if free > 0 {
            free -= 1
        } else {
            await withCheckedContinuation { waiting.append($0) }
        }
    }

    func release() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
