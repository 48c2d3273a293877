public import SyncCore

/// The writes of one change set (``SyncClient/changeSet(_:)``): made on the local store in one transaction, queued
/// as one set, and applied on the server together or not at all. Valid only inside the closure it is given to.
///
/// For example, a list and its owner's member row, so that no device sees one without the other:
/// ```swift
/// try await client.changeSet { set in
///     try set.insert(Member(id: memberID, list: listID, user: me, role: "owner"), into: members)
///     try set.insert(TodoList(id: listID, name: "Groceries"), into: lists)
/// }
/// ```
public struct ChangeSet {
    let writer: LocalStoreWriter
    let number: Int64
    let makeID: @Sendable () -> String

    /// Inserts an item locally and queues its insert in the set; an item without an `id` gets one.
    ///
    /// - Parameters:
    ///   - item: The new item.
    ///   - table: Its table.
    /// - Returns: The item, with its generated id when it had none.
    /// - Throws: ``LocalWriteError`` when the item exists (locally or with a pending insert); `ValueError` when its
    ///   `id` is not a string. The whole set is then undone.
    @discardableResult
    public func insert<Item: Codable & Sendable>(_ item: Item, into table: SyncTable<Item>) throws -> Item {
        var value = try ItemCoder.json(item)
        let generated = try SyncContext.givingID(&value, makeID)
        let stored = try SyncContext.apply(.insert, value, in: table.name, writer: writer, changeSet: number)
        return generated ? try ItemCoder.item(stored, as: Item.self, in: table.name) : item
    }

    /// Replaces an item locally and queues its update in the set, as ``SyncTable/update(_:)`` does.
    ///
    /// - Parameters:
    ///   - item: The changed item (keep its `version`).
    ///   - table: Its table.
    /// - Returns: The item as stored.
    /// - Throws: ``LocalWriteError`` when the item does not exist locally or its delete is pending. The whole set is
    ///   then undone.
    @discardableResult
    public func update<Item: Codable & Sendable>(_ item: Item, in table: SyncTable<Item>) throws -> Item {
        let stored = try SyncContext.apply(
            .update, try ItemCoder.json(item), in: table.name, writer: writer,
            knownFields: { ItemCoder.knownFields(of: Item.self, in: $0) }, changeSet: number)
        return try ItemCoder.item(stored, as: Item.self)
    }

    /// Deletes an item locally and queues its delete in the set.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - table: Its table.
    /// - Throws: ``LocalWriteError`` when the item does not exist locally. The whole set is then undone.
    public func delete<Item: Codable & Sendable>(id: ItemID, from table: SyncTable<Item>) throws {
        _ = try SyncContext.apply(
            .delete, .object(["id": .string(id.rawValue)]), in: table.name, writer: writer, changeSet: number)
    }
}

extension SyncClient {
    /// What a push does with a change set when the server cannot apply one atomically
    /// (``Configuration/changeSetsWithoutAtomicServer``).
    public enum ChangeSetFallback: Sendable, Hashable {
        /// The set's operations are not sent; the push reports them (``PushError/operationsFailed(_:)``, status 501)
        /// and sends the rest of the queue. They stay queued, and go once the server offers atomic batches.
        case refuse
        /// The set's operations are sent one by one (or in a plain batch), in order: each is applied or refused by
        /// itself, so another device may see some of them without the others, and a refusal of one leaves the others
        /// applied.
        case sendSeparately
    }

    /// Makes the writes `body` makes one change set: they are made on the local store in one transaction (all kept,
    /// or none when `body` throws), queued as one set, and pushed as one atomic batch (docs/batch.md) — applied on the
    /// server together or not at all. A conflict or refusal of any member sends the whole set back: the failed members
    /// are parked with their errors (``operationErrors()``), the others wait with them, and once every one is
    /// resolved the next push sends the set again. Collapsing never moves a change across the set's boundary: a later
    /// write of one of its items, outside the set, is queued after it. Against a server without atomic batches (any
    /// Azure Mobile Apps or Datasync backend, and the v3 dialect), ``Configuration/changeSetsWithoutAtomicServer``
    /// decides. Field merges of conflicts (``FieldConflictPolicy``) apply to set members too; the merged set is sent
    /// again as a whole.
    ///
    /// - Parameter body: The writes, made through the ``ChangeSet`` it is given (synchronously, in the transaction).
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (then nothing was written), or ``LocalStoreError``. Cancellation does not
    ///   interrupt the transaction: it is kept or undone as a whole.
    @discardableResult
    public func changeSet<T: Sendable>(_ body: @escaping @Sendable (ChangeSet) throws -> T) async throws -> T {
        let makeID = configuration.makeID
        return try await store.write { writer in
            try body(ChangeSet(writer: writer, number: try writer.newChangeSet(), makeID: makeID))
        }
    }
}
