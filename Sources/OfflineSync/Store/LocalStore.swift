import SyncCore
import SyncOData

/// The device-side database: table rows, the ordered queue of pending operations, their errors, and
/// the pull cursors. `SQLiteLocalStore` is the one apps use; the role lets tests wrap it to inject faults. Every
/// local change runs in one `write(_:)` transaction, so a crash leaves the row and the queue both changed or both
/// unchanged.
protocol LocalStore: Sendable {
    /// Runs `body` in one write transaction: all its changes are kept, or none if it throws.
    ///
    /// - Parameter body: The work, given a writer valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, or a store failure.
    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalStoreWriter) throws -> T) async throws -> T

    /// Runs `body` on a consistent snapshot.
    ///
    /// - Parameter body: The work, given a reader valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, or a store failure.
    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalStoreReader) throws -> T) async throws -> T

    /// Runs `body` while this client holds the store's push lock: one push at a time per store, across
    /// every client and process that opened it, so that two pushes never send the same operation.
    /// Waits while another holder has it. The lock is let go when `body` ends, and by the system when
    /// the process dies.
    ///
    /// The default runs `body` at once with no lock: a custom store that several clients or processes
    /// open at the same time must provide one.
    /// - Parameter body: The push.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, ``LocalStoreError`` when the lock cannot be taken, or
    ///   `CancellationError` when the task is cancelled while waiting (the lock was not taken).
    func withPushLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T

    /// Erases everything the store holds — every table's rows, the queue, operation errors, cursors, items to
    /// fetch again and settings — so that no byte of it is left in the store's files. `check` runs first, in
    /// the same transaction: what it throws stops the erase with nothing erased.
    ///
    /// - Parameter check: Reads the store before it is erased (a sign-out refuses while changes wait).
    /// - Throws: What `check` throws; ``LocalStoreError`` when the store cannot be erased.
    func erase(after check: @escaping @Sendable (any LocalStoreReader) throws -> Void) async throws

    /// Observes what `fetch` reads from `tables`: emits its value at once, then again after each committed
    /// change to those tables whose result differs from the last one emitted (changes to other tables, or ones
    /// that leave the result as it was, emit nothing). Quick commits may be merged into one value; the last
    /// value always reflects the last commit.
    ///
    /// The default returns nil: a custom store says that it cannot observe.
    /// - Parameters:
    ///   - tables: The sync tables `fetch` reads (made ready to be observed even before their first row).
    ///   - fetch: Reads the value, on a consistent snapshot.
    /// - Returns: The values, until the consumer stops iterating (or its task is cancelled); the stream
    ///   finishes with ``LocalStoreError`` when the store fails, or with what `fetch` throws.
    func observe<T: Sendable & Equatable>(
        _ tables: [TableName], _ fetch: @escaping @Sendable (any LocalStoreReader) throws -> T
    ) -> AsyncThrowingStream<T, any Error>?
}

extension LocalStore {
    /// Cannot observe (see the requirement).
    func observe<T: Sendable & Equatable>(
        _ tables: [TableName], _ fetch: @escaping @Sendable (any LocalStoreReader) throws -> T
    ) -> AsyncThrowingStream<T, any Error>? {
        nil
    }

    /// Runs `body` with no lock (see the requirement).
    func withPushLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await body()
    }
}

/// What a ``LocalStore`` lets its callers read.
protocol LocalStoreReader {
    /// One item, or nil.
    func item(_ id: ItemID, in table: TableName) throws -> JSONValue?
    /// Whether the item exists (cheaper than reading it).
    func containsItem(_ id: ItemID, in table: TableName) throws -> Bool
    /// The items matching a query's filter, in its order (then by id), with its skip and top.
    func items(in table: TableName, matching query: ODataQuery) throws -> [JSONValue]
    /// How many items match `filter` (all items when nil).
    func count(in table: TableName, matching filter: ODataExpression?) throws -> Int
    /// Pending operations in queue order, after `sequence` when given, at most `limit` of them.
    func operations(after sequence: Int64?, limit: Int?) throws -> [PendingOperation]
    /// The operation at queue position `id`, or nil when it is no longer queued.
    func operation(_ id: Int64) throws -> PendingOperation?
    /// The item's last pending operation, or nil.
    func lastOperation(for id: ItemID, in table: TableName) throws -> PendingOperation?
    /// The ids of a table's items that have pending operations.
    func itemIDsWithOperations(in table: TableName) throws -> Set<ItemID>
    /// How many operations are pending, in one table or in all.
    func operationCount(in table: TableName?) throws -> Int
    /// Every kept operation error, in queue order.
    func operationErrors() throws -> [OperationError]
    /// The cursor of an incremental pull, or nil before its first page.
    func cursor(for table: TableName, queryID: QueryID) throws -> PullCursor?
    /// A stored setting (such as the installation id), or nil.
    func setting(_ key: String) throws -> String?
    /// The `version` of a stored item, or nil when the item is absent or has none (a pull skips rows
    /// whose version the store already has).
    func itemVersion(_ id: ItemID, in table: TableName) throws -> String?
    /// The items of a table that must be fetched again from the server, because an operation left
    /// the queue without a server reply (PROTOCOL.md §5).
    func itemsToRefetch(in table: TableName) throws -> [ItemID]
}

extension LocalStoreReader {
    /// By default the version is read from ``item(_:in:)``.
    func itemVersion(_ id: ItemID, in table: TableName) throws -> String? {
        try item(id, in: table)?["version"]?.stringValue
    }
}

extension LocalStoreWriter {
    /// By default the text is parsed and stored as ``upsert(_:in:)`` stores an item (a pull hands
    /// over an item that holds only the fields it reads, and the whole row as `text`).
    func upsert(_ item: JSONValue, text: String, in table: TableName) throws {
        try upsert(try JSONValue(parsing: text), in: table)
    }
}

/// What a ``LocalStore`` lets a write transaction change.
protocol LocalStoreWriter: LocalStoreReader {
    /// Inserts or replaces an item (by its `id`).
    func upsert(_ item: JSONValue, in table: TableName) throws
    /// Inserts or replaces an item whose JSON text is already at hand (as a pull received it). `item`
    /// may hold only some of the fields (`id`, `updatedAt`, `deleted`); `text` is the whole row.
    func upsert(_ item: JSONValue, text: String, in table: TableName) throws
    /// Creates the table's rows table if it has none yet (so that an observation of the table sees its first row).
    func prepareTable(_ table: TableName) throws
    /// Removes an item; nothing happens when it is absent.
    func deleteItem(_ id: ItemID, in table: TableName) throws
    /// Removes the items matching `filter` (all items when nil).
    func deleteItems(in table: TableName, matching filter: ODataExpression?) throws
    /// Appends an operation to the queue, giving it the next sequence number.
    func enqueue(_ kind: OperationKind, itemID: ItemID, in table: TableName, item: JSONValue?) throws
        -> PendingOperation
    /// Saves an operation's changed kind, item, attempt or re-creation mark.
    func updateOperation(_ operation: PendingOperation) throws
    /// Removes an operation and its error.
    func removeOperation(_ id: Int64) throws
    /// Removes every operation of a table, and their errors.
    func removeOperations(in table: TableName) throws
    /// Notes that an item must be fetched again from the server (see
    /// ``LocalStoreReader/itemsToRefetch(in:)``).
    func markForRefetch(_ id: ItemID, in table: TableName) throws
    /// Forgets that an item must be fetched again.
    func removeRefetch(_ id: ItemID, in table: TableName) throws
    /// Keeps (or replaces) the error of an operation.
    func saveError(_ error: OperationError) throws
    /// Removes the error of an operation.
    func removeError(operationID: Int64) throws
    /// Sets or clears the cursor of an incremental pull. Setting never moves an existing cursor back
    /// (two clients pulling one store at once must not make a third re-read what both applied).
    func setCursor(_ cursor: PullCursor?, for table: TableName, queryID: QueryID) throws
    /// Clears every cursor of a table.
    func removeCursors(in table: TableName) throws
    /// Stores or clears a setting.
    func setSetting(_ value: String?, for key: String) throws
}
