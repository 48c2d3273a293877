import Foundation
import OfflineSyncTesting
import PropertyBased
import Testing

@testable import OfflineSync

/// The collapse table of PROTOCOL.md §6, on the real SQLite store.
@Suite struct OperationQueueTests {
    typealias Decision = PendingOperationQueue.Decision

    static func operation(_ kind: OperationKind, inFlight: Bool = false) throws -> PendingOperation {
        PendingOperation(
            id: 1, table: try TableName("T"), itemID: try ItemID("a"), kind: kind,
            attempt: inFlight ? .init(item: nil, version: nil) : nil)
    }

    @Test(arguments: [
        (OperationKind?.none, OperationKind.insert, Decision.append(.insert)),
        (nil, .update, .append(.update)),
        (nil, .delete, .append(.delete)),
        (.insert, .insert, .reject(.alreadyExists)),
        (.insert, .update, .keep),
        (.insert, .delete, .remove),
        (.update, .insert, .reject(.alreadyExists)),
        (.update, .update, .keep),
        (.update, .delete, .change(to: .delete)),
        (.delete, .insert, .change(to: .update)),
        (.delete, .update, .reject(.deleted)),
        (.delete, .delete, .reject(.alreadyDeleted)),
    ])
    func decidesByTheCollapseTable(pending: OperationKind?, new: OperationKind, expected: Decision) throws {
        #expect(PendingOperationQueue.decide(new, after: try pending.map { try Self.operation($0) }) == expected)
    }

    @Test(arguments: [
        (OperationKind.insert, OperationKind.update, Decision.append(.update)),
        (.insert, .delete, .append(.delete)),
        (.update, .update, .append(.update)),
        (.update, .delete, .append(.delete)),
        (.delete, .insert, .append(.insert)),
        (.insert, .insert, .reject(.alreadyExists)),
        (.delete, .update, .reject(.deleted)),
    ])
    func appendsBehindAnOperationInFlight(pending: OperationKind, new: OperationKind, expected: Decision) throws {
        #expect(PendingOperationQueue.decide(new, after: try Self.operation(pending, inFlight: true)) == expected)
    }

    @Test func collapsesOnTheStoreAndKeepsQueuePositions() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let table = try client.syncTable("TodoItem", of: TodoItem.self)
        try await table.insert(TodoItem(id: "a", text: "a", complete: false))
        try await table.insert(TodoItem(id: "b", text: "b", complete: false))
        // insert + update stays an insert; insert + delete vanishes.
        try await table.update(TodoItem(id: "a", text: "a2", complete: true))
        try await table.delete(id: ItemID("b"))
        #expect(try await client.pendingOperations().map { "\($0.kind):\($0.itemID)" } == ["insert:a"])
        #expect(try await table.item(id: ItemID("a"))?.text == "a2")
        #expect(try await table.item(id: ItemID("b")) == nil)
        // A rejected write changes nothing and names the pending operation.
        let error = await #expect(throws: LocalWriteError.self) {
            try await table.insert(TodoItem(id: "a", text: "dup", complete: false))
        }
        #expect(error?.reason == .alreadyExists)
        #expect(error?.pendingOperation?.kind == .insert)
        #expect(error?.description.contains("pending insert") == true)
        #expect(try await table.item(id: ItemID("a"))?.text == "a2")
        // Updating or deleting what the store does not have is refused.
        await #expect(throws: LocalWriteError.self) {
            try await table.update(TodoItem(id: "zz", text: "", complete: false))
        }
        await #expect(throws: LocalWriteError.self) { try await table.delete(id: ItemID("zz")) }
    }

    @Test func aBatchInsertIsAllOrNothing() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let table = try client.syncTable("TodoItem", of: TodoItem.self)
        try await table.insert(TodoItem(id: "x", text: "x", complete: false))
        await #expect(throws: LocalWriteError.self) {
            try await table.insert(contentsOf: [
                TodoItem(id: "y", text: "y", complete: false), TodoItem(id: "x", text: "again", complete: false),
            ])
        }
        #expect(try await table.count() == 1)
        try await table.insert(
            contentsOf: (0..<500).map { TodoItem(id: "n\($0)", text: "\($0)", complete: $0 % 2 == 0) })
        #expect(try await table.count() == 501)
        #expect(try await client.pendingOperations().count == 501)
        #expect(try await table.count(matching: TableQuery().filter { $0.complete == true }) == 250)
    }

    /// Collapsing never changes the outcome: the queue, replayed on a server, leaves what the local
    /// writes left.
    @Test func collapsingMatchesReplayingEveryWrite() async {
        let kinds = Gen<OperationKind>.case.array(of: 0...12)
        await propertyCheck(count: 300, input: kinds) { kinds in
            var local: Bool? = nil  // nil: absent; true: present
            var queue: [OperationKind] = []
            var serverHas = false
            for kind in kinds {
                let pending = try queue.last.map { try Self.operation($0) }
                let existsLocally = local == true
                if pending == nil, (kind == .insert) == existsLocally { continue }  // refused by the store
                switch PendingOperationQueue.decide(kind, after: pending) {
                case .reject: continue
                case .append(let new): queue.append(new)
                case .keep: break
                case .change(let new): queue[queue.count - 1] = new
                case .remove: queue.removeLast()
                }
                local = kind != .delete
            }
            for kind in queue { serverHas = kind != .delete }
            #expect(serverHas == (local == true), "\(kinds) → \(queue)")
        }
    }
}
