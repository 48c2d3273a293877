import Foundation
import GRDB
import Hummingbird
import SyncCore
import SyncSQL
import SyncServer

/// A sync-server running in this process on 127.0.0.1 (any port), over a temporary SQLite file.
struct BenchServer {
    let url: URL

    /// The benchmark's table: declared columns, so that the seeded file and the server agree.
    static func todoItem(pageSize: Int = 1000) throws -> TableConfiguration {
        try TableConfiguration(
            name: "TodoItem", pageSize: pageSize, maxTop: pageSize, columns: ["text": .string, "complete": .bool])
    }

    /// Creates the server's file with `rows` TodoItem rows, stamped 1 ms apart.
    static func seed(path: String, rows: Int) async throws {
        let store = try SQLiteTableStore(path: path)
        try await store.prepare([try todoItem()])
        let database = try DatabaseQueue(path: path)
        let base: Int64 = 1_700_000_000_000
        try await database.write { db in
            let statement = try db.makeStatement(
                sql: """
                    INSERT INTO todoitem (id, createdAt, updatedAt, version, deleted, text, complete) VALUES (?, ?, ?, ?, 0, ?, ?)
                    """)
            for index in 0..<rows {
                let stamp = base + Int64(index)
                try statement.execute(arguments: [
                    String(format: "item-%07d", index), stamp, stamp, "v\(stamp)", "Task number \(index)",
                    index % 2 == 0,
                ])
            }
        }
    }

    /// Changes `count` rows of the server's file from row `start` on, as another device's writes would: new text
    /// (`tag`), a new version, and an `updatedAt` after every seeded row's.
    static func changeRows(at path: String, from start: Int, count: Int, tag: String) async throws {
        let database = try DatabaseQueue(path: path)
        let base = Int64(Date().timeIntervalSince1970 * 1000)
        try await database.write { db in
            let statement = try db.makeStatement(
                sql: "UPDATE todoitem SET text = ?, version = ?, updatedAt = ? WHERE id = ?")
            for index in start..<(start + count) {
                try statement.execute(arguments: [
                    "\(tag) \(index)", "c\(base + Int64(index))", base + Int64(index - start),
                    String(format: "item-%07d", index),
                ])
            }
        }
    }

    /// Runs `body` while the server serves `path`, its table's pages of at most `pageSize` rows, compressing its
    /// responses or not (the loopback cases do not, as before compression; the link cases do).
    static func run<T: Sendable>(
        path: String, pageSize: Int = 1000, compressing: Bool = false, _ body: @Sendable (BenchServer) async throws -> T
    ) async throws -> T {
        try await run(.sqlite(path: path), pageSize: pageSize, compressing: compressing, body)
    }

    /// The shared cases' tables: `TodoItem` (with a `listId`) shared through `ListMember` (docs/sharing.md).
    static func sharedTables(pageSize: Int = 1000) throws -> [TableConfiguration] {
        var members = try TableConfiguration(
            name: "ListMember", columns: ["listId": .string, "userId": .string, "role": .string])
        members.members = MembersTable(groupColumn: "listId", userColumn: "userId", roleColumn: "role")
        var items = try TableConfiguration(
            name: "TodoItem", pageSize: pageSize, maxTop: pageSize,
            columns: ["text": .string, "complete": .bool, "listId": .string])
        items.membershipScope = MembershipScope(column: "listId", members: members.name)
        return [members, items]
    }

    /// The HS256 secret of a server run with `perUser` or `shared`.
    static let secret = "sync-bench-secret-0123456789abcdef"

    /// Runs `body` while the server serves `database`, its PostgreSQL writes stamped as `stamping` says;
    /// with `perUser`, `TodoItem` is a per-user table and requests need tokens signed with ``secret`` (with
    /// `authenticated`, every table does); with `attachments`, its `file` column names files (up to 2 GB); its callers
    /// share it as `fairShares` says.
    static func run<T: Sendable>(
        _ database: DatabaseLocation, stamping: PostgresTableStore.Stamping = .serialized, perUser: Bool = false,
        shared: Bool = false, authenticated: Bool = false, pageSize: Int = 1000, compressing: Bool = false,
        hooks: TableHooks? = nil, attachments: Bool = false, retention: Duration? = nil,
        fairShares: FairShares = FairShares(), _ body: @Sendable (BenchServer) async throws -> T
    ) async throws -> T {
        var configuration = SyncServerConfiguration()
        configuration.fairShares = fairShares
        configuration.hooks = hooks.map { ["TodoItem": $0] } ?? [:]
        configuration.port = 0
        configuration.database = database
        configuration.postgresStamping = stamping
        configuration.compressionMinimumSize = compressing ? 1024 : nil
        var table = try todoItem(pageSize: pageSize)
        table.perUser = perUser
        table.tombstoneRetention = retention
        if attachments {
            table.attachmentColumns = ["file"]
            configuration.attachments.maxSize = 2_000_000_000
            // The bare PUT of the reference sends 50 MB in one body: 80 s at 4g's 5 Mbit/s up, past the default 60 s.
            configuration.connectionLimits.bodyTimeout = .seconds(900)
        }
        configuration.tables = [table]
        if shared { configuration.tables = try sharedTables(pageSize: pageSize) }
        if perUser || shared || authenticated { configuration.auth = AuthConfiguration(hs256Secret: secret) }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = try await buildApplication(configuration) { port in continuation.yield(port) }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await app.runService(gracefulShutdownSignals: []); return nil
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let result = try await body(BenchServer(url: URL(string: "http://127.0.0.1:\(port)")!))
            group.cancelAll()
            return result
        }
    }
}
