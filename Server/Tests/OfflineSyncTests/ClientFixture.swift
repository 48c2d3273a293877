import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineSync
import OfflineSyncTesting
import SyncServer
import Testing

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
        offersBatch: Bool = true, _ body: @Sendable (_ url: URL) async throws -> T
    ) async throws -> T {
        var configuration = SyncServerConfiguration()
        configuration.port = 0
        configuration.database = .sqlite(path: workspace.path("server.sqlite"))
        configuration.tables = tables
        configuration.auth = auth
        configuration.offersBatch = offersBatch
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
        configuration.batchPush = PushPath.current
        configure(&configuration)
        return SyncClient(
            url: url, store: try SQLiteLocalStore(path: workspace.path(name)), configuration: configuration)
    }
}

/// How the clients a test makes push (``SyncClient/Configuration/batchPush``): set by ``onBothPushPaths``.
enum PushPath {
    @TaskLocal static var current = SyncClient.BatchPush.whenOffered
}

/// Runs each test of a suite twice: its clients pushing through the batch endpoint from the first operation
/// (`.always`), then one request per operation (`.never`, the v2 wire) — so every push case (conflicts,
/// refusals, lost replies, retries, ordering) is checked on both paths.
struct OnBothPushPaths: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void)
        async throws
    {
        guard testCase != nil else { return try await function() }  // the suite itself
        for path in [SyncClient.BatchPush.always, .never] {
            print("\(test.name): pushing \(path == .always ? "in batches" : "one request per operation")")
            try await PushPath.$current.withValue(path) { try await function() }
        }
    }
}

extension Trait where Self == OnBothPushPaths {
    /// See ``OnBothPushPaths``.
    static var onBothPushPaths: Self { OnBothPushPaths() }
}
