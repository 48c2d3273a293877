public import Foundation
public import SyncCore
import SyncOData

/// A table used offline. Reads and writes run on the local store at once; each write also queues
/// an operation that ``SyncClient/push()`` sends later. ``pull(_:queryID:progress:)`` brings the
/// server's changes.
///
/// Items are `Codable & Sendable` with a `String` `id`; the system properties `createdAt`,
/// `updatedAt`, `version` and `deleted` are mapped by name when the type declares them.
public struct SyncTable<Item: Codable & Sendable>: Sendable {
    /// The table's name.
    public let name: TableName
    let client: SyncClient
    /// The fields that name files, and when to download them (``SyncClient/syncTable(_:of:attachments:)``).
    var attachmentPolicy: AttachmentPolicy?

    /// Inserts an item locally and queues its insert; an item without an `id` gets one.
    ///
    /// - Parameter item: The new item.
    /// - Returns: The item, with its generated id when it had none.
    /// - Throws: ``LocalWriteError`` when the item exists (locally or with a pending insert).
    @discardableResult
    public func insert(_ item: Item) async throws -> Item {
        try await insert(contentsOf: [item])[0]
    }

    /// Inserts items locally and queues their inserts, all in one transaction.
    ///
    /// - Parameter items: The new items.
    /// - Returns: The items, with generated ids filled in.
    /// - Throws: ``LocalWriteError`` for the first item that cannot be inserted; then none is.
    ///   `ValueError` when an item's `id` is not a string (ids are strings on the wire), before anything
    ///   is written.
    @discardableResult
    public func insert(contentsOf items: [Item]) async throws -> [Item] {
        var generatedIDs = false
        let values = try items.map { item in
            var value = try ItemCoder.json(item)
            if try SyncContext.givingID(&value, client.configuration.makeID) { generatedIDs = true }
            return value
        }
        let stored = try await client.context.write(.insert, values, in: name)
        // The stored items differ from the given ones only by generated ids (and stripped server fields).
        guard generatedIDs else { return items }
        return try stored.map { try ItemCoder.item($0, as: Item.self, in: name) }
    }

    /// Replaces an item locally and queues its update. The stored row's fields that `Item` does not read (a
    /// column another app, or another version of this one, added) are kept, so they reach the server again with
    /// the update; the fields it reads are as the item has them (an optional left nil leaves the local row).
    ///
    /// - Parameter item: The changed item (keep its `version`: it is the push's precondition).
    /// - Returns: The item as stored.
    /// - Throws: ``LocalWriteError`` when the item does not exist locally or its delete is pending.
    @discardableResult
    public func update(_ item: Item) async throws -> Item {
        let stored = try await client.context.write(.update, [try ItemCoder.json(item)], in: name) { row in
            ItemCoder.knownFields(of: Item.self, in: row)
        }
        return try ItemCoder.item(stored[0], as: Item.self)
    }

    /// Deletes an item locally and queues its delete.
    ///
    /// - Parameter item: The item.
    /// - Throws: ``LocalWriteError`` when the item does not exist locally.
    public func delete(_ item: Item) async throws {
        _ = try await client.context.write(.delete, [try ItemCoder.json(item)], in: name)
        try await client.context.attachments.removeUnnamedAttachments()
    }

    /// Deletes the item with `id` locally and queues its delete.
    ///
    /// - Parameter id: The item's id.
    /// - Throws: ``LocalWriteError`` when the item does not exist locally.
    public func delete(id: ItemID) async throws {
        _ = try await client.context.write(.delete, [.object(["id": .string(id.rawValue)])], in: name)
        try await client.context.attachments.removeUnnamedAttachments()
    }

    /// One item from the local store.
    ///
    /// - Parameter id: The item's id.
    /// - Returns: The item, or nil.
    /// - Throws: ``LocalStoreError``; ``ItemDecodingError`` when the row does not fit `Item`.
    public func item(id: ItemID) async throws -> Item? {
        let name = self.name
        guard let value = try await client.store.read({ try $0.item(id, in: name) }) else { return nil }
        return try ItemCoder.item(value, as: Item.self, in: name)
    }

    /// Items from the local store, with a filter, order, skip and top.
    ///
    /// For example:
    /// ```swift
    /// let open = try await todos.items(matching: TableQuery().filter { $0.complete == false }.orderBy(\.text))
    /// ```
    /// - Parameter query: The query; all items by default.
    /// - Returns: The matching items.
    /// - Throws: `ValueError` for a key path that names no field, `ODataError` for a query the store cannot
    ///   run, ``LocalStoreError``; ``ItemDecodingError`` (naming the row and the field) for a row that does not fit
    ///   `Item`, such as a field another client left null that `Item` does not declare optional.
    public func items(matching query: TableQuery<Item> = TableQuery()) async throws -> [Item] {
        let name = self.name
        let query = try query.checked()
        return try await client.store.read { try $0.items(in: name, matching: query) }
            .map { try ItemCoder.item($0, as: Item.self, in: name) }
    }

    /// How many local items meet a query's filter (its order, skip and top play no part).
    ///
    /// - Parameter query: The query; every item by default.
    /// - Returns: The count.
    /// - Throws: `ValueError` for a key path that names no field, `ODataError`, ``LocalStoreError``.
    public func count(matching query: TableQuery<Item> = TableQuery()) async throws -> Int {
        let name = self.name
        let filter = try query.checked().filter
        return try await client.store.read { try $0.count(in: name, matching: filter) }
    }

    /// Watches the local items a query matches: yields them at once, then again each time a committed change
    /// makes them differ — a local write, a pull's page, a purge, a conflict's resolution, in this client or in
    /// another one (or process) on the same store. Changes to other tables, or to items the query does not
    /// match, yield nothing; quick changes may be yielded together, the last value always current.
    ///
    /// For example, to keep a list on screen:
    /// ```swift
    /// for try await open in todos.observe(TableQuery().filter { $0.complete == false }.orderBy(\.text)) {
    ///     render(open)
    /// }
    /// ```
    /// - Parameter query: The query; all items by default.
    /// - Returns: The matching items, as ``items(matching:)`` reads them. The sequence ends when the task
    ///   iterating it is cancelled (or stops iterating), and when the client signs out
    ///   (``SyncClient/signOut(pending:)``); it throws `ValueError` for a key path that names no
    ///   field, `ODataError` for a query the store cannot run, and ``LocalStoreError`` when the store fails.
    public func observe(_ query: TableQuery<Item> = TableQuery()) -> AsyncThrowingStream<[Item], any Error> {
        let name = self.name
        return observed { store in
            let query = try query.checked()
            return store.observe([name]) { reader in try reader.items(in: name, matching: query) }
        } transform: { rows in
            try rows.map { try ItemCoder.item($0, as: Item.self, in: name) }
        }
    }

    /// Watches how many local items meet a query's filter, as ``observe(_:)`` watches its items.
    ///
    /// - Parameter query: The query; every item by default (its order, skip and top play no part).
    /// - Returns: The count, at once and after every change to it. The sequence ends when the task iterating it
    ///   is cancelled or the client signs out; it throws as ``observe(_:)`` does.
    public func observeCount(_ query: TableQuery<Item> = TableQuery()) -> AsyncThrowingStream<Int, any Error> {
        let name = self.name
        return observed { store in
            let filter = try query.checked().filter
            return store.observe([name]) { reader in try reader.count(in: name, matching: filter) }
        } transform: {
            $0
        }
    }

    /// Relays a store observation, each value transformed, until the consumer stops.
    private func observed<Source: Sendable & Equatable, Value: Sendable>(
        _ start: @escaping @Sendable (SQLiteLocalStore) throws -> AsyncThrowingStream<Source, any Error>,
        transform: @escaping @Sendable (Source) throws -> Value
    ) -> AsyncThrowingStream<Value, any Error> {
        let store = client.store
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Value.self)
        // A sign-out of the store's account ends the observation.
        let registration = client.observers.add { continuation.finish() }
        let task = Task {
            do {
                for try await value in try start(store) { continuation.yield(try transform(value)) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { [observers = client.observers] _ in
            task.cancel()
            observers.remove(registration)
        }
        return stream
    }

    /// Pulls the server's rows into the local store. With a `queryID` the pull is incremental: only
    /// rows changed since that query's last pull are fetched. Pending operations of the table are
    /// pushed first.
    ///
    /// - Parameters:
    ///   - query: The rows to pull (its filter; order, skip and top are the pull's own).
    ///   - queryID: Names the incremental pull; nil pulls every matching row.
    ///   - progress: Called after each page with the rows applied so far and the total when known.
    /// - Returns: What the pull did.
    /// - Throws: ``PullError``; ``AccountError`` when the token is for another account than the store's (nothing
    ///   sent); `ValueError` before anything is sent when a key path of `query` names no field. With an
    ///   ``AttachmentPolicy/Download/afterPull`` policy, the pulled rows' files are then downloaded: ``AttachmentError``
    ///   or ``ServerUnavailableError`` when one cannot be (the rows are kept; the next pull tries again).
    @discardableResult
    public func pull(
        _ query: TableQuery<Item> = TableQuery(), queryID: QueryID? = nil,
        progress: (@Sendable (PullProgress) -> Void)? = nil
    ) async throws -> PullSummary {
        let filter = try query.checked().filter
        try await recordAttachmentFields()
        let summary = try await client.activity.pull(name) { report in
            try await client.context.pull(
                name, filter: filter, queryID: queryID, pageSize: client.configuration.pullPageSize,
                maxPageSize: client.configuration.maxPullPageSize, ahead: client.configuration.pullsAhead,
                progress: { page in
                    report(page)
                    progress?(page)
                })
        }
        try await prefetchAfterPull()
        return summary
    }

    /// Pulls as ``pull(_:queryID:progress:)`` does, reporting progress as a stream: one element per
    /// page applied, then the end (or the pull's error). Ending the iteration cancels the pull; pages
    /// applied by then are kept.
    ///
    /// For example:
    /// ```swift
    /// for try await progress in todos.pullProgress(queryID: "allTodoItems") {
    ///     print("\(progress.appliedCount) of \(progress.totalCount ?? 0)")
    /// }
    /// ```
    /// - Parameters:
    ///   - query: The rows to pull.
    ///   - queryID: Names the incremental pull; nil pulls every matching row.
    /// - Returns: The progress stream.
    public func pullProgress(_ query: TableQuery<Item> = TableQuery(), queryID: QueryID? = nil)
        -> AsyncThrowingStream<PullProgress, any Error>
    {
        AsyncThrowingStream { continuation in
            let pull = Task {
                do {
                    _ = try await self.pull(query, queryID: queryID) { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in pull.cancel() }
        }
    }

    /// Clears the local table, or the rows matching a query.
    ///
    /// - Parameters:
    ///   - query: The rows to clear; all by default. Clearing all resets every cursor of the table.
    ///   - queryID: A cursor to reset along with the rows.
    ///   - mode: Whether pending operations prevent the purge.
    /// - Throws: ``PurgeError`` when operations are pending and `mode` is `.refuseIfPending`; `ValueError` for a
    ///   key path that names no field.
    /// - Warning: `.evenIfPending` drops the table's local changes that were not pushed.
    public func purge(_ query: TableQuery<Item>? = nil, queryID: QueryID? = nil, mode: PurgeMode = .refuseIfPending)
        async throws
    {
        try await client.context.puller.purge(name, filter: query?.checked().filter, queryID: queryID, mode: mode)
    }

    /// When the last pull of this table finished without error (any query), or nil before the first.
    ///
    /// - Returns: The date, to the millisecond.
    /// - Throws: ``LocalStoreError``.
    public func lastSyncDate() async throws -> Date? {
        let key = PullRunner.lastPullKey(name)
        return try await client.store.read { try $0.setting(key) }.flatMap { WireDate(parsing: $0)?.date }
    }

    /// This table's pending operations.
    ///
    /// - Returns: The operations, in push order.
    /// - Throws: ``LocalStoreError``.
    public func pendingOperations() async throws -> [PendingOperation] {
        try await client.pendingOperations().filter { $0.table.canonical == name.canonical }
    }
}
