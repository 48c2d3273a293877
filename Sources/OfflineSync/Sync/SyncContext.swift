import Foundation
import Logging
import SyncCore
import SyncOData

/// Owns the operation queue for one client: local writes and their queue, and the one push at a time that push,
/// pull and sign-out share (a second caller waits for the first to finish, then pushes). The jobs themselves run
/// in their runners beside their plans — ``PushRunner``, ``PullRunner``, ``AttachmentTransfers`` — over one set of
/// ``SyncParts``.
actor SyncContext {
    nonisolated let parts: SyncParts
    nonisolated let pusher: PushRunner
    nonisolated let puller: PullRunner
    nonisolated let attachments: AttachmentTransfers
    /// The push running now, which the next push waits for.
    private var currentPush: Task<PushResult, any Error>?

    init(
        store: SQLiteLocalStore, endpoint: TableEndpoint, account: AccountGuard, logger: Logger,
        conflictHandler: ConflictHandler?, fieldConflicts: [String: FieldConflictPolicy] = [:],
        changeSetFallback: SyncClient.ChangeSetFallback = .refuse, retry: RetryPolicy,
        now: @escaping @Sendable () -> Date, attachments settings: AttachmentSettings
    ) {
        let parts = SyncParts(
            store: store, endpoint: endpoint, account: account, logger: logger, retry: retry, now: now)
        let attachments = AttachmentTransfers(parts: parts, attachmentSettings: settings)
        self.parts = parts
        self.attachments = attachments
        pusher = PushRunner(
            parts: parts, conflictHandler: conflictHandler, fieldConflicts: fieldConflicts,
            changeSetFallback: changeSetFallback, attachments: attachments)
        puller = PullRunner(parts: parts, attachments: attachments)
    }

    nonisolated var store: SQLiteLocalStore { parts.store }

    // MARK: Local writes

    /// Writes items locally and queues their operations, all in one transaction. `knownFields`, for an update
    /// through a typed model: the fields the model knows of a stored row (nil: all of them); see ``apply``.
    nonisolated func write(
        _ kind: OperationKind, _ items: [JSONValue], in table: TableName,
        knownFields: (@Sendable (JSONValue) -> Set<String>?)? = nil
    ) async throws -> [JSONValue] {
        try await store.write { writer in
            try items.map { item in try Self.apply(kind, item, in: table, writer: writer, knownFields: knownFields) }
        }
    }

    /// Gives an item about to be inserted the id `makeID` makes when it has none (or null, or ""): true when it did.
    ///
    /// - Throws: `ValueError` when its `id` is not a string (ids are strings on the wire; a number is a table of
    ///   integer ids, which offline sync cannot hold).
    static func givingID(_ value: inout JSONValue, _ makeID: () -> String) throws -> Bool {
        switch value["id"] {
        case nil, .null?, .string("")?:
            value["id"] = .string(makeID())
            return true
        case .string?:
            return false
        case .int?:
            throw ValueError(kind: "item", reason: SystemProperty.integerIDsReason)
        case .some:
            throw ValueError(kind: "item", reason: "its 'id' must be a String (ids are strings on the wire)")
        }
    }

    /// One local write: the row, then the queue per PROTOCOL.md §6 (in the caller's transaction), in `changeSet` when
    /// given. An update keeps the stored row's fields that `knownFields` says the item's model does not know (a column
    /// another app version or another app added): the item replaces the row, and a v3 update replaces it on the
    /// server.
    static func apply(
        _ kind: OperationKind, _ item: JSONValue, in table: TableName, writer: LocalStoreWriter,
        knownFields: ((JSONValue) -> Set<String>?)? = nil, changeSet: Int64? = nil
    ) throws -> JSONValue {
        guard let id = item.itemID else { throw ValueError(kind: "item", reason: item.missingIDReason) }
        // An insert only needs to know whether the row exists; updates and deletes need its content.
        let existing = kind == .insert ? nil : try writer.item(id, in: table)
        let exists = kind == .insert ? try writer.containsItem(id, in: table) : existing != nil
        let pending = try writer.lastOperation(for: id, in: table)
        if pending == nil {
            if kind == .insert, exists { throw LocalWriteError(.alreadyExists, table: table, itemID: id) }
            if kind != .insert, !exists { throw LocalWriteError(.notFound, table: table, itemID: id) }
        }
        let decision = PendingOperationQueue.decide(kind, after: pending, inSet: changeSet)
        if case .reject(let reason) = decision {
            throw LocalWriteError(reason, table: table, itemID: id, pendingOperation: pending)
        }
        // The row.
        var stored = item
        switch kind {
        case .insert:
            stored = item.removing([.createdAt, .updatedAt, .deleted])
            if !exists { stored = stored.removing([.version]) }
            try writer.upsert(stored, in: table)
        case .update:
            stored = item.removing([.deleted])
            if let existing, let known = knownFields?(existing), let fields = existing.userFields.objectValue {
                for (name, value) in fields where stored[name] == nil && !known.contains(name) { stored[name] = value }
            }
            for property in [SystemProperty.createdAt, .updatedAt, .version] where stored[property.rawValue] == nil {
                stored[property.rawValue] = existing?[property.rawValue]
            }
            try writer.upsert(stored, in: table)
        case .delete:
            stored = existing ?? item
            try writer.deleteItem(id, in: table)
        }
        // The queue.
        switch decision {
        case .append(let newKind):
            // An update's base: the row before this write — the server's as last pulled or pushed, or, behind an
            // operation already sent, the row that one sent (its completion gives the server's row instead).
            _ = try writer.enqueue(
                newKind, itemID: id, in: table, item: newKind == .delete ? stored : nil,
                base: newKind == .update ? existing : nil, changeSet: changeSet)
        case .keep:
            break  // the push sends the row as it is then
        case .change(let newKind):
            guard var operation = pending else { break }
            operation.kind = newKind
            operation.item = newKind == .delete ? stored : nil
            operation.base = nil  // a delete and an insert again: its base is not known (the whole row goes)
            try writer.updateOperation(operation)
        case .remove:
            if let operation = pending { try writer.removeOperation(operation.id) }
        case .reject:
            break
        }
        return stored
    }

    // MARK: Push serialization

    /// Pushes every pending operation, after any push already running.
    func push() async throws -> PushResult {
        let previous = currentPush
        let task = Task { [self] in
            _ = try? await previous?.value
            return try await self.pusher.pushAll()
        }
        currentPush = task
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    // MARK: The runners' jobs, for the client

    /// Pulls a table (``PullRunner/pull(_:filter:queryID:pageSize:maxPageSize:ahead:progress:push:)``), pushing
    /// first through this context.
    nonisolated func pull(
        _ table: TableName, filter: ODataExpression?, queryID: QueryID?, pageSize: Int, maxPageSize: Int,
        ahead: Bool, progress: (@Sendable (PullProgress) -> Void)?
    ) async throws -> PullSummary {
        try await puller.pull(
            table, filter: filter, queryID: queryID, pageSize: pageSize, maxPageSize: maxPageSize, ahead: ahead,
            progress: progress, push: push)
    }
}
