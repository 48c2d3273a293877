import OfflineSyncTesting
import SyncCore
import Testing

@testable import OfflineSync

/// The push's plan without I/O: random queues played through it as the push plays them, with random failures fed
/// back after each send.
@Suite(.timeLimit(.minutes(3))) struct PushPlanTests {
    static func operation(_ id: Int64, _ item: String, recreates: Bool = false) throws -> PendingOperation {
        PendingOperation(
            id: id, table: try TableName("TodoItem"), itemID: try ItemID(item), kind: .update, recreatesItem: recreates)
    }

    @Test func aBatchIsSentBeforeASecondOperationOfOneOfItsItems() throws {
        var plan = PushPlan(parked: [])
        let (a1, b1, a2) = (try Self.operation(1, "a"), try Self.operation(2, "b"), try Self.operation(3, "a"))
        #expect(plan.batchBefore(a1, offered: 10) == nil)
        #expect(plan.place(a1, offered: 10) == .batched)
        #expect(plan.batchBefore(b1, offered: 10) == nil)
        #expect(plan.place(b1, offered: 10) == .batched)
        #expect(plan.batchBefore(a2, offered: 10)?.map(\.id) == [1, 2])
        plan.blocked.insert(a1.key)  // a1 failed in that batch
        #expect(plan.place(a2, offered: 10) == .skipped)
        #expect(plan.finish() == nil)
    }

    /// Issue 49: a change set's members are one run whatever the offer, ended by the first operation outside it; when
    /// one member waits, the whole set does (those gathered before it and those after).
    @Test func aChangeSetIsOneRunAndWaitsWhole() throws {
        func member(_ id: Int64, _ item: String, set: Int64?) throws -> PendingOperation {
            var operation = try Self.operation(id, item)
            operation.changeSet = set
            return operation
        }
        var plan = PushPlan(parked: [6])
        let single = try member(1, "x", set: nil)
        #expect(plan.place(single, offered: 10) == .batched)
        let (a, b) = (try member(2, "a", set: 1), try member(3, "b", set: 1))
        #expect(plan.batchBefore(a, offered: 10)?.map(\.id) == [1], "a plain batch ends where a set begins")
        #expect(plan.place(a, offered: nil) == .batched, "a set's run, even with no offer")
        #expect(plan.batchBefore(b, offered: nil) == nil)
        #expect(plan.place(b, offered: nil) == .batched)
        let next = try member(4, "c", set: 2)
        #expect(plan.batchBefore(next, offered: 10)?.map(\.id) == [2, 3], "a set ends where another begins")
        #expect(plan.place(next, offered: 10) == .batched)
        // Set 2's second member is parked: the set waits whole, its first member too, and its last.
        let parked = try member(6, "d", set: 2)
        #expect(plan.batchBefore(parked, offered: 10) == nil)
        #expect(plan.place(parked, offered: 10) == .skipped)
        let last = try member(7, "e", set: 2)
        #expect(plan.batchBefore(last, offered: 10) == nil)
        #expect(plan.place(last, offered: 10) == .skipped)
        #expect(plan.blocked == ["todoitem/c", "todoitem/d", "todoitem/e"])
        let after = try member(8, "f", set: nil)
        #expect(plan.batchBefore(after, offered: 10) == nil)
        #expect(plan.place(after, offered: 10) == .batched)
        #expect(plan.finish()?.map(\.id) == [8])
    }

    @Test func reCreationsAndPushesWithoutAnOfferGoAlone() throws {
        var plan = PushPlan(parked: [7])
        #expect(plan.place(try Self.operation(1, "a", recreates: true), offered: 10) == .alone)
        #expect(plan.place(try Self.operation(2, "b"), offered: nil) == .alone)
        #expect(plan.place(try Self.operation(7, "c"), offered: 10) == .skipped, "parked")
        #expect(plan.place(try Self.operation(8, "c"), offered: 10) == .skipped, "behind the parked one")
    }

    /// Random queues of 1–60 operations on 1–8 items, a tenth re-creating their item, some parked, with the offer
    /// changing between operations (none, or 1–5 per batch), and each sent operation failing with probability
    /// 0.15. Checks: every operation is sent once or skipped; sends follow queue order; a batch holds distinct
    /// items, never a re-creation, and no more than the largest offer; an operation is skipped exactly when it or
    /// an earlier operation of its item was parked, failed or skipped. 3 seeds × 1,000 queues.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomQueuesKeepItemsInOrderAndBatchesDistinct(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<1000 {
            let items = 1 + Int(random.next() % 8)
            let operations = try (1...(1 + Int(random.next() % 60))).map { id in
                try Self.operation(
                    Int64(id), "i\(random.next() % UInt64(items))", recreates: random.next() % 10 == 0)
            }
            let parked = Set(operations.filter { _ in random.next() % 20 == 0 }.map(\.id))
            var plan = PushPlan(parked: parked)
            var sent: [Int64] = []
            var skipped: Set<Int64> = []
            var failedKeys: Set<String> = []
            var stopped: Set<String> = []  // the model: items with a parked, failed or skipped operation
            func send(_ group: [PendingOperation]) {
                for operation in group {
                    sent.append(operation.id)
                    if random.next() % 100 < 15 {
                        plan.blocked.insert(operation.key)
                        failedKeys.insert(operation.key)
                    }
                }
            }
            var largest = 0
            for operation in operations {
                let offered: Int? = random.next() % 4 == 0 ? nil : 1 + Int(random.next() % 5)
                largest = max(largest, offered ?? 0)
                if let batch = plan.batchBefore(operation, offered: offered) {
                    #expect(Set(batch.map(\.key)).count == batch.count, "distinct items in a batch")
                    #expect(batch.count <= largest && !batch.contains(where: \.recreatesItem))
                    send(batch)
                }
                let shouldWait =
                    stopped.contains(operation.key) || failedKeys.contains(operation.key)
                    || parked.contains(operation.id)
                switch plan.place(operation, offered: offered) {
                case .skipped:
                    skipped.insert(operation.id)
                    stopped.insert(operation.key)
                    #expect(shouldWait, "skipped without a reason: \(operation.id)")
                case .alone:
                    #expect(!shouldWait)
                    #expect(operation.recreatesItem || offered == nil)
                    send([operation])
                case .batched:
                    #expect(!shouldWait)
                }
            }
            if let batch = plan.finish() {
                #expect(Set(batch.map(\.key)).count == batch.count)
                send(batch)
            }
            #expect(sent == sent.sorted(), "queue order")
            #expect(Set(sent).count == sent.count && Set(sent).union(skipped) == Set(operations.map(\.id)))
            #expect(Set(sent).isDisjoint(with: skipped))
        }
    }
}
