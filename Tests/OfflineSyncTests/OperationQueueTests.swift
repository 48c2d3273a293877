import Foundation
import OfflineSyncTesting
import PropertyBased
import Testing

@testable import OfflineSync

/// The collapse table of PROTOCOL.md §6, on the real SQLite store.
@Suite(.timeLimit(.minutes(3))) struct OperationQueueTests {
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

    /// Issue 49: a write never collapses into an operation of another change set, or of none when it is in one (or of
    /// one when it is in none) — it is appended as behind a frozen operation; within one set the table holds.
    @Test(arguments: [(Int64?.none, Int64?.some(1)), (1, nil), (1, 2)])
    func neverCollapsesAcrossAChangeSetsBoundary(pendingSet: Int64?, writeSet: Int64?) throws {
        for pending in OperationKind.allCases {
            var operation = try Self.operation(pending)
            operation.changeSet = pendingSet
            var frozen = try Self.operation(pending, inFlight: true)
            frozen.changeSet = pendingSet
            for new in OperationKind.allCases {
                #expect(
                    PendingOperationQueue.decide(new, after: operation, inSet: writeSet)
                        == PendingOperationQueue.decide(new, after: frozen, inSet: pendingSet),
                    "\(pending) then \(new)")
            }
        }
        var inSet = try Self.operation(.insert)
        inSet.changeSet = 3
        #expect(PendingOperationQueue.decide(.delete, after: inSet, inSet: 3) == .remove)
        #expect(PendingOperationQueue.decide(.update, after: inSet, inSet: 3) == .keep)
    }

    /// Issue 49 on the real store: a change set's writes are one transaction (a throw in the middle leaves nothing,
    /// neither rows nor operations); its operations share one set; a later write of one of its items outside it is
    /// queued after it, and a write inside it collapses as usual.
    @Test func aChangeSetIsOneTransactionAndKeepsItsBoundary() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let table = try client.syncTable("TodoItem", of: TodoItem.self)
        struct Stop: Error {}
        await #expect(throws: Stop.self) {
            try await client.changeSet { set in
                try set.insert(TodoItem(id: "a", text: "x", complete: false), into: table)
                throw Stop()
            }
        }
        #expect(try await table.items().isEmpty)
        #expect(try await client.pendingOperations().isEmpty)
        let made = try await client.changeSet { set in
            try set.insert(TodoItem(id: "a", text: "x", complete: false), into: table)
            try set.update(TodoItem(id: "a", text: "y", complete: false), in: table)  // collapses into the insert
            return try set.insert(TodoItem(id: "", text: "z", complete: false), into: table)
        }
        #expect(!made.id.isEmpty)
        try await table.update(TodoItem(id: "a", text: "later", complete: true))
        let queued = try await client.pendingOperations()
        #expect(queued.map(\.kind) == [.insert, .insert, .update])
        #expect(queued[0].changeSet != nil && queued[0].changeSet == queued[1].changeSet && queued[2].changeSet == nil)
        try await client.changeSet { set in try set.delete(id: ItemID("a"), from: table) }
        let last = try #require(try await client.pendingOperations().last)
        #expect(last.kind == .delete && last.changeSet != nil && last.changeSet != queued[0].changeSet)
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
