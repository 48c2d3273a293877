/// Which of the queue's operations a push sends in a batch, alone, or not at all — as a value: the push hands it
/// each operation in queue order with the batch size the server offers now, sends what it returns, and tells it
/// which operations failed. No I/O, so every sequence can be tested without a server (PROTOCOL.md §7, docs/batch.md).
///
/// - An operation of an item whose earlier operation failed, or is parked with an error, waits (is skipped), and so
///   do the item's later ones: an item's operations are applied in order or not at all.
/// - A batch holds operations of distinct items (a later operation of an item waits for the batch's answer), at
///   most the offered number, in queue order; it is sent before an operation that cannot join it.
/// - An operation that re-creates its item, or any operation while no batch is offered, is sent alone.
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
    /// The next batch, of distinct items.
    private var run: [PendingOperation] = []
    private var runKeys: Set<String> = []

    /// A plan for a push that found `parked` operations parked with errors.
    init(parked: Set<Int64>) { self.parked = parked }

    /// The batch to send before `operation` is placed, when it cannot join the one being gathered: it goes alone,
    /// its item is already in the batch, or the batch is full.
    ///
    /// - Parameter offered: The most operations per batch the server offers now; nil when it offers none.
    /// - Returns: The operations of the batch to send now (the plan forgets them), or nil.
    mutating func batchBefore(_ operation: PendingOperation, offered: Int?) -> [PendingOperation]? {
        let limit = Self.limit(of: operation, offered: offered)
        guard !run.isEmpty, limit == nil || runKeys.contains(operation.key) || run.count >= limit! else { return nil }
        defer { (run, runKeys) = ([], []) }
        return run
    }

    /// Places `operation`, after ``batchBefore(_:offered:)``.
    ///
    /// - Parameter offered: As for ``batchBefore(_:offered:)``.
    /// - Returns: Where it goes.
    mutating func place(_ operation: PendingOperation, offered: Int?) -> Placement {
        let key = operation.key
        if blocked.contains(key) || parked.contains(operation.id) {
            blocked.insert(key)
            return .skipped
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
        defer { (run, runKeys) = ([], []) }
        return run
    }

    /// The batch size for `operation`: none for one that re-creates its item (its undelete or replace goes first).
    private static func limit(of operation: PendingOperation, offered: Int?) -> Int? {
        operation.recreatesItem ? nil : offered
    }
}
