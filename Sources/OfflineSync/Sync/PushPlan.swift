/// Which of the queue's operations a push sends in a batch, alone, or not at all — as a value: the push hands it
/// each operation in queue order with the batch size the server offers now, sends what it returns, and tells it
/// which operations failed. No I/O, so every sequence can be tested without a server (PROTOCOL.md §7, docs/batch.md).
///
/// - An operation of an item whose earlier operation failed, is parked with an error, or was merged to go on the next
///   push, waits (is skipped), and so do the item's later ones: an item's operations are applied in order or not at
///   all.
/// - A batch holds operations of distinct items (a later operation of an item waits for the batch's answer), at
///   most the offered number, in queue order; it is sent before an operation that cannot join it.
/// - An operation that re-creates its item, or any operation while no batch is offered, is sent alone.
/// - The operations of a change set (``PendingOperation/changeSet``, contiguous in the queue) form a run of their own,
///   whatever the offer, sent as one atomic batch (``PushRunner/pushSet(_:result:blocked:)``); when any of them waits,
///   they all do.
struct PushPlan: Sendable {
    /// Where an operation goes.
    enum Placement: Equatable {
        /// It waits: an earlier operation of its item failed or is parked.
        case skipped
        /// It joined the next batch.
        case batched
        /// Send it alone, now.
        case alone
    }

    /// Operations already parked with an error when the push began.
    let parked: Set<Int64>
    /// The items whose earlier operation failed or is parked: their later operations wait.
    var blocked: Set<String> = []
    /// The next batch, of distinct items — or the change set being gathered.
    private var run: [PendingOperation] = []
    private var runKeys: Set<String> = []
    /// The change set whose operations ``run`` gathers, if it does.
    private var runSet: Int64?
    /// The change set that waits because one of its operations does.
    private var waitingSet: Int64?

    /// A plan for a push that found `parked` operations parked with errors.
    init(parked: Set<Int64>) { self.parked = parked }

    /// The batch to send before `operation` is placed, when it cannot join the one being gathered: it goes alone,
    /// its item is already in the batch, the batch is full, or one of them is a change set's run and the other is not
    /// of that set.
    ///
    /// - Parameter offered: The most operations per batch the server offers now; nil when it offers none.
    /// - Returns: The operations of the batch to send now (the plan forgets them), or nil.
    mutating func batchBefore(_ operation: PendingOperation, offered: Int?) -> [PendingOperation]? {
        guard !run.isEmpty else { return nil }
        if runSet != nil || operation.changeSet != nil {
            // A set's run ends with the set; nothing joins it, and it joins nothing.
            guard operation.changeSet != runSet else { return nil }
            return finish()
        }
        let limit = Self.limit(of: operation, offered: offered)
        guard limit == nil || runKeys.contains(operation.key) || run.count >= limit! else { return nil }
        return finish()
    }

    /// Places `operation`, after ``batchBefore(_:offered:)``.
    ///
    /// - Parameter offered: As for ``batchBefore(_:offered:)``.
    /// - Returns: Where it goes.
    mutating func place(_ operation: PendingOperation, offered: Int?) -> Placement {
        let key = operation.key
        if let set = operation.changeSet, set == waitingSet {
            blocked.insert(key)
            return .skipped
        }
        if blocked.contains(key) || parked.contains(operation.id) {
            blocked.insert(key)
            if let set = operation.changeSet {
                // The whole set waits: the members gathered so far too.
                waitingSet = set
                blocked.formUnion(runKeys)
                (run, runKeys, runSet) = ([], [], nil)
            }
            return .skipped
        }
        if let set = operation.changeSet {
            run.append(operation)
            runKeys.insert(key)
            runSet = set
            return .batched
        }
        guard Self.limit(of: operation, offered: offered) != nil else { return .alone }
        run.append(operation)
        runKeys.insert(key)
        return .batched
    }

    /// The last batch, at the end of the queue.
    ///
    /// - Returns: Its operations (the plan forgets them), or nil.
    mutating func finish() -> [PendingOperation]? {
        guard !run.isEmpty else { return nil }
        defer { (run, runKeys, runSet) = ([], [], nil) }
        return run
    }

    /// The batch size for `operation`: none for one that re-creates its item (its undelete or replace goes first).
    private static func limit(of operation: PendingOperation, offered: Int?) -> Int? {
        operation.recreatesItem ? nil : offered
    }
}
