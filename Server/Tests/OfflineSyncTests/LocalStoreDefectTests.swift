import Foundation
import OfflineSyncTesting
import Testing

@testable import OfflineSync

/// Defects of the local store found through the public API (issue 12, point 8). Each failed before
/// its fix.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct LocalStoreDefectTests {
    /// Point 8e: a second client on the same store cleared the first one's in-flight mark, so an edit
    /// made during the first one's push collapsed into the operation being sent and was lost.
    @Test func anEditThroughASecondClientOnTheSameStoreDuringAPushIsKept() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let gate = GatedTransport()
            let first = try await SyncClient.make(url, workspace: workspace, store: "shared.sqlite") {
                $0.transport = gate
            }
            try await first.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "a", text: "before", complete: false))
            async let pushed = first.push()
            await gate.waitForRequest()
            // An app extension opens the same store and edits the item while the insert is on the wire.
            let second = try await SyncClient.make(url, workspace: workspace, store: "shared.sqlite")
            var item = try #require(try await second.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("a")))
            item.text = "edited meanwhile"
            try await second.syncTable("TodoItem", of: TodoItem.self).update(item)
            gate.open()
            _ = try await pushed
            #expect(
                try await first.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("a"))?.text
                    == "edited meanwhile")
            try await second.push()
            #expect(
                try await second.table("TodoItem", of: TodoItem.self).item(id: ItemID("a"))?.text == "edited meanwhile")
        }
    }

    @Test func twoClientsPushingOneStoreAtOnceSendEachOperationOnce() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let one = try await SyncClient.make(url, workspace: workspace, store: "shared.sqlite") {
                $0.transport = transport
            }
            let two = try await SyncClient.make(url, workspace: workspace, store: "shared.sqlite") {
                $0.transport = transport
            }
            try await one.syncTable("TodoItem", of: TodoItem.self).insert(
                contentsOf: (0..<20).map { TodoItem(id: "i\($0)", text: "\($0)", complete: false) })
            async let first = one.push()
            async let second = two.push()
            let counts = try await [first.pushedCount, second.pushedCount]
            #expect(counts.reduce(0, +) == 20)
            // Each operation is sent once: alone, or as one of a batch's requests.
            let sent = transport.requests.map { request in
                request.url.path.hasSuffix("/batch")
                    ? (try? JSONValue(parsing: request.body ?? Data()))?["requests"]?.arrayValue?.count ?? 0 : 1
            }
            #expect(sent.reduce(0, +) == 20)
            #expect(try await one.pendingOperations().isEmpty)
        }
    }
}

/// A transport that holds its first request until ``open()``, then forwards everything.
final class GatedTransport: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind `lock`.
    private let base = URLSessionTransport()
    private let lock = NSLock()
    private var isOpen = false
    private var held: CheckedContinuation<Void, Never>?
    private var arrival: CheckedContinuation<Void, Never>?
    private var arrived = false

    /// Waits until the first request is held.
    func waitForRequest() async {
        await withCheckedContinuation { continuation in
            let ready = lock.withLock {
                if arrived { return true }
                arrival = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Lets the held request (and every later one) through.
    func open() {
        let waiting = lock.withLock {
            isOpen = true
            defer { held = nil }
            return held
        }
        waiting?.resume()
    }

    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        await withCheckedContinuation { continuation in
            let (pass, notify): (Bool, CheckedContinuation<Void, Never>?) = lock.withLock {
                arrived = true
                defer { arrival = nil }
                if isOpen { return (true, arrival) }
                held = continuation
                return (false, arrival)
            }
            notify?.resume()
            if pass { continuation.resume() }
        }
        return try await base.send(request)
    }
}
