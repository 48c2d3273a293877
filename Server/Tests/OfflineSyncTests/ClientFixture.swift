import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineSync
import SyncServer
import Testing

/// A real sync-server on 127.0.0.1 (any port) with a real SQLite file.
enum LiveServer {
    static func run<T: Sendable>(
        in workspace: Workspace, tables: [TableConfiguration] = [], auth: AuthConfiguration? = nil,
        offersBatch: Bool = true, configure: (inout SyncServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (_ url: URL) async throws -> T
    ) async throws -> T {
        var configuration = SyncServerConfiguration()
        configuration.port = 0
        configuration.database = .sqlite(path: workspace.path("server.sqlite"))
        configuration.tables = tables
        configuration.auth = auth
        configuration.offersBatch = offersBatch
        configure(&configuration)
        return try await buildApplication(configuration).test(.live) { client in
            try await body(URL(string: "http://127.0.0.1:\(client.port ?? 0)")!)
        }
    }

    /// A URL where nothing listens: the server is "down".
    static let down = URL(string: "http://127.0.0.1:9")!
}
