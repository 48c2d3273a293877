import Foundation
import OfflineSync
import OfflineSyncTesting
import Testing

// The fixture of the SDK's tests, in this package and in Server/ (whose OfflineSyncTests links this file).

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

extension SyncClient {
    /// A client on a store file in `workspace`, speaking the wire of the test (``Wire/current``).
    static func make(
        _ url: URL, workspace: Workspace, store name: String = "client.sqlite",
        configure: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> SyncClient {
        var configuration = SyncClient.Configuration()
        configuration.clock = ImmediateClock()  // retries without waiting; tests that check waits set their own
        // A hang guard, not a measure: in the whole suite on two cores an in-process server can leave a request
        // unanswered for over 30 s (the default), 4 times running: seeders of PullTests and CompressionTests
        // (2026-11-25), a push of SharingTests and one of TutorialFlowTests in CI (2026-11-28), each mended alone
        // before. Tests that check timeouts set their own.
        configuration.requestTimeout = .seconds(120)
        configuration.protocol = Wire.current.protocol
        configuration.batchPush = Wire.current.batchPush
        configure(&configuration)
        return SyncClient(
            url: url, store: try SQLiteLocalStore(path: workspace.path(name)), configuration: configuration)
    }
}

extension SyncClient {
    /// Two devices on one server, `a.sqlite` and `b.sqlite`: A speaks the wire's dialect, B that of a second client
    /// (``Wire/protocol(ofClient:)``), configured further by `configureA` and `configureB`.
    static func pair(
        _ url: URL, workspace: Workspace, configureA: (inout SyncClient.Configuration) -> Void = { _ in },
        configureB: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> (a: SyncClient, b: SyncClient) {
        let a = try await make(url, workspace: workspace, store: "a.sqlite", configure: configureA)
        let b = try await make(url, workspace: workspace, store: "b.sqlite") {
            $0.protocol = Wire.current.protocol(ofClient: 1)
            configureB(&$0)
        }
        return (a, b)
    }
}

/// What the clients a test makes speak: the protocol's dialect and how pushes go. Set by ``OnEveryWire``.
struct Wire: Sendable, CustomStringConvertible {
    var `protocol` = SyncClient.ProtocolVersion.v2
    var batchPush = SyncClient.BatchPush.whenOffered
    /// Whether tests with several clients give them both dialects in turn (``protocol(ofClient:)``).
    var mixesProtocols = false

    @TaskLocal static var current = Wire()

    /// v2, pushing through the batch endpoint from the first operation.
    static let v2Batched = Wire(protocol: .v2, batchPush: .always)
    /// v2, one request per operation (`PATCH`, `DELETE` answered 200 with the item, `Link` pages).
    static let v2 = Wire(protocol: .v2, batchPush: .never)
    /// v3 (Datasync): `PUT`, `DELETE` answered 204, 410 for tombstones, `{"items"}` pages; never batched.
    static let v3 = Wire(protocol: .v3, batchPush: .whenOffered)
    /// Clients of one test in turn v2 and v3, on one server.
    static let mixed = Wire(protocol: .v2, batchPush: .whenOffered, mixesProtocols: true)

    /// The dialect of a test's `index`-th client: ``protocol``, or in turn v2 and v3 when ``mixesProtocols``.
    func `protocol`(ofClient index: Int) -> SyncClient.ProtocolVersion {
        mixesProtocols ? (index % 2 == 0 ? .v2 : .v3) : self.protocol
    }

    var description: String {
        switch (self.protocol, batchPush) {
        case _ where mixesProtocols: "v2 and v3 clients in turn"
        case (.v3, _): "v3 (Datasync)"
        case (.v2, .always): "v2, pushing in batches"
        case (.v2, _): "v2, one request per operation"
        }
    }
}

/// Runs each test of a suite once per wire: v2 pushing in batches, v2 one request per operation, v3, and clients in
/// turn v2 and v3 (for tests with two devices) — so every case (conflicts, refusals, lost replies, retries,
/// ordering, pulls) is checked on each, against the same server.
struct OnEveryWire: SuiteTrait, TestTrait, TestScoping {
    var wires = [Wire.v2Batched, .v2, .v3, .mixed]
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void)
        async throws
    {
        guard testCase != nil else { return try await function() }  // the suite itself
        for wire in wires {
            print("\(test.name): \(wire)")
            try await Wire.$current.withValue(wire) { try await function() }
        }
    }
}

extension Trait where Self == OnEveryWire {
    /// See ``OnEveryWire``.
    static var onEveryWire: Self { OnEveryWire() }
    /// v2, then v3, each pushing as by default.
    static var onBothProtocols: Self { OnEveryWire(wires: [Wire(), .v3]) }
    /// v2, v3, then clients of both dialects in turn on one server (for tests with several clients).
    static var onBothProtocolsAndMixed: Self { OnEveryWire(wires: [Wire(), .v3, .mixed]) }
}
