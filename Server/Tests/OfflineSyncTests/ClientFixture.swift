import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineSync
import OfflineSyncTesting
import SyncServer

/// The to-do item of the tutorial.
struct TodoItem: Codable, Sendable, Equatable {
    var id: String
    var text: String
    var complete: Bool
    var version: String?
    var updatedAt: Date?
}

/// A folder for one test's files, removed afterwards.
final class Workspace: @unchecked Sendable {  // @unchecked: immutable after init.
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("offlinesync-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A real sync-server on 127.0.0.1 (any port) with a real SQLite file.
enum LiveServer {
    static func run<T: Sendable>(
        in workspace: Workspace, tables: [TableConfiguration] = [], auth: AuthConfiguration? = nil,
        _ body: @Sendable (_ url: URL) async throws -> T
    ) async throws -> T {
        var configuration = SyncServerConfiguration()
        configuration.port = 0
        configuration.database = .sqlite(path: workspace.path("server.sqlite"))
        configuration.tables = tables
        configuration.auth = auth
        return try await buildApplication(configuration).test(.live) { client in
            try await body(URL(string: "http://127.0.0.1:\(client.port ?? 0)")!)
        }
    }

    /// A URL where nothing listens: the server is "down".
    static let down = URL(string: "http://127.0.0.1:9")!
}

extension SyncClient {
    /// A client on a store file in `workspace`.
    static func make(
        _ url: URL, workspace: Workspace, store name: String = "client.sqlite",
        configure: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> SyncClient {
        var configuration = SyncClient.Configuration()
        configuration.clock = ImmediateClock()  // retries without waiting; tests that check waits set their own
        configure(&configuration)
        return SyncClient(
            url: url, store: try SQLiteLocalStore(path: workspace.path(name)), configuration: configuration)
    }
}
