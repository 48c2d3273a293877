import Foundation
import Logging
import SyncCore
import SyncOData

/// Sends the queue (PROTOCOL.md §7) — alone or in batches as ``PushPlan`` decides, each reply decided by
/// ``PushDecision`` — and applies resolutions. ``SyncContext`` runs one push at a time.
struct PushRunner: SyncRunner {
    let parts: SyncParts
    let conflictHandler: ConflictHandler?
    /// The policy of each table (by canonical name) for fields changed on both sides; absent: surface them.
    let fieldConflicts: [String: FieldConflictPolicy]
    /// What a change set does when the server cannot apply it atomically.
    let changeSetFallback: SyncClient.ChangeSetFallback
    /// The files a row's change names go first.
    let attachments: AttachmentTransfers
}

extension PushRunner {
    /// What happened to one operation.
    enum PushOutcome {
        /// Accepted; `merged`: after a conflict merged by itself (``merge(_:with:status:)``).
        case pushed(merged: Bool)
        case failed(OperationError)
        /// A conflict handler settled it without pushing (server wins, discard).
        case resolved
        /// Merged by itself or resolved to go again, with no resolution left in this push: it stays queued and goes
        /// on the next push, and its item's later operations wait for it (sent now, they would go before it, over a
        /// base the merge left behind).
        case waiting
        case skipped
    }

    /// Sends every pending operation of every table in queue order (PROTOCOL.md §7), holding the
    /// store's push lock so that no other client or process pushes the same queue meanwhile.
    func pushAll() async throws -> PushResult {
        account.beginSync()
        return try await store.withPushLock { try await self.pushQueue() }
    }

    private func pushQueue() async throws -> PushResult {
        var result = PushResult()
        let parked = Set(try await store.read { reader in try reader.operationErrors().map(\.operation.id) })
        var plan = PushPlan(parked: parked)
        var after: Int64?
        logger.debug("Push started")
        do {
            // A row's change goes only once the files it names are on the server.
            try await attachments.uploadAttachments()
            while true {
                let position = after
                let operations = try await store.read { reader in try reader.operations(after: position, limit: 200) }
                guard !operations.isEmpty else { break }
                for operation in operations {
                    after = operation.id
                    let offered = endpoint.batchOffer.limits?.operations
                    if let batch = plan.batchBefore(operation, offered: offered) {
                        try await pushRun(batch, result: &result, blocked: &plan.blocked)
                    }
                    let placement = plan.place(operation, offered: offered)
                    if placement == .skipped { continue }
                    if Task.isCancelled { throw SyncStop.cancelled }
                    if placement == .alone {
                        let outcome = try await pushOne(
                            operation, resolutionsLeft: 1, sentBefore: operation.isAttempted)
                        Self.record(outcome, of: operation, in: &result, blocked: &plan.blocked)
                    }
                }
            }
            if let batch = plan.finish() { try await pushRun(batch, result: &result, blocked: &plan.blocked) }
        } catch SyncStop.unavailable(let error) {
            logger.info("Push stopped: server unavailable", metadata: [SyncLogKey.operations: "\(result.pushedCount)"])
            throw PushError.serverUnavailable(error, result)
        } catch SyncStop.unauthorized {
            throw PushError.unauthorized(result)
        } catch SyncStop.cancelled {
            throw PushError.cancelled(result)
        }
        logger.debug(
            "Push finished",
            metadata: [SyncLogKey.operations: "\(result.pushedCount)", SyncLogKey.failed: "\(result.errors.count)"])
        try await attachments.removeUnnamedAttachments()
        if !result.errors.isEmpty {
            logger.info("Push left refused operations", metadata: [SyncLogKey.failed: "\(result.errors.count)"])
            throw PushError.operationsFailed(result)
        }
        return result
    }

    /// Pushes a run the plan gathered: a change set's members as a set, other operations as a batch.
    private func pushRun(_ run: [PendingOperation], result: inout PushResult, blocked: inout Set<String>)
        async throws
    {
        if run.first?.changeSet != nil {
            try await pushSet(run, result: &result, blocked: &blocked)
        } else {
            try await pushBatch(run, result: &result, blocked: &blocked)
        }
    }

    /// Freezes one operation (what it sends is kept before it is sent), sends it until a definitive
    /// reply, and records the outcome.
    ///
    /// - Parameters:
    ///   - queued: The operation.
    ///   - resolutionsLeft: How many times a resolution or a merge may send it again in this push.
    ///   - sentBefore: Whether an earlier send of its attempt may have been applied: an earlier push sent it and
    ///     read no reply (it was attempted when read from the queue), or a batch's answer for it was transient.
    func pushOne(_ queued: PendingOperation, resolutionsLeft: Int, sentBefore: Bool) async throws -> PushOutcome {
        let prepared = try await store.write { [account] writer in
            try account.confirm(in: writer)  // what is sent comes from the store of the account its requests carry
            return try Self.freeze(queued.id, writer: writer)
        }
        guard let operation = prepared, let attempt = operation.attempt else { return .skipped }
        let (decision, reply) = try await exchange(operation, attempt, sentBefore: sentBefore)
        return try await settle(operation, decision, reply, resolutionsLeft: resolutionsLeft)
    }

    /// Records what a definitive reply decided: a success completes the operation, a conflict or a refusal
    /// parks it.
    func settle(
        _ operation: PendingOperation, _ decision: PushDecision, _ reply: HTTPResponseData, resolutionsLeft: Int
    )
        async throws -> PushOutcome
    {
        if case .succeeded(let serverItem) = decision {
            try await complete(operation, serverItem: serverItem)
            return .pushed(merged: false)
        }
        // What else a definitive reply decides: a conflict, with the server's row, or a refusal, with none.
        var serverItem: JSONValue?
        if case .conflict(let item) = decision { serverItem = item }
        let error = OperationError(
            operation: operation, status: reply.status, message: reply.message,
            sentItem: operation.attempt?.item ?? operation.item, serverItem: serverItem)
        return try await park(operation, error, resolutionsLeft: resolutionsLeft)
    }

    /// Freezes an operation: what it sends is kept before it is first sent, and sent exactly so again after a
    /// lost reply (PROTOCOL.md §8). Nil when it is gone, or when its row is (purged): then nothing is sent.
    static func freeze(_ id: Int64, writer: LocalStoreWriter) throws -> PendingOperation? {
        guard var operation = try writer.operation(id) else { return nil }
        if operation.attempt != nil { return operation }  // sent before: send exactly that again
        if operation.kind == .delete {
            operation.attempt = .init(item: nil, version: operation.item?.version)
        } else {
            guard let row = try writer.item(operation.itemID, in: operation.table) else {
                try writer.removeOperation(operation.id)  // the row is gone (purged): nothing to send
                return nil
            }
            operation.attempt = .init(
                item: row.removing(SystemProperty.serverManaged),
                version: operation.kind == .update ? row.version : nil)
        }
        try writer.updateOperation(operation)
        return operation
    }

    /// Sends an operation until a definitive reply: re-creates the item first when asked, retries
    /// transient failures, and fetches the server's row when the reply lacks it. `sentBefore`: an earlier send of
    /// the attempt may have been applied (see ``PushDecision/decide(_:status:replyItem:server:sent:resent:)``).
    private func exchange(_ operation: PendingOperation, _ attempt: PendingOperation.Attempt, sentBefore: Bool)
        async throws -> (PushDecision, HTTPResponseData)
    {
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(operation.table)"
        var kind = operation.kind
        var version = attempt.version
        let sent = Self.body(of: operation, sendsChanges: endpoint.wire.updateSendsChanges)
        if operation.recreatesItem {
            let recreation = endpoint.wire.recreation
            let url = endpoint.url(
                operation.table, id: operation.itemID,
                query: recreation.carriesItem ? endpoint.wire.includeDeletedParameter : nil)
            let reply = try await sendRetrying(logger: log) {
                try await endpoint.send(
                    recreation.method, url, body: recreation.carriesItem ? sent : nil, features: ["OL"])
            } isTransient: { reply in
                recreation.isTransient(reply, sent)
            }
            switch recreation.outcome(reply) {
            case .send(let newKind, let newVersion): (kind, version) = (newKind, newVersion)
            case .answeredAsUpdate: return (try await decide(.update, operation, reply, sent: sent, logger: log), reply)
            case .refused: return (.refused, reply)
            }
        }
        var sends = 0
        let reply = try await sendRetrying(logger: log) {
            sends += 1
            return try await send(kind, operation, body: sent, version: version)
        } isTransient: { reply in
            PushDecision.decide(kind, status: reply.status, replyItem: reply.item, server: .unknown, sent: sent)
                == .retry
        }
        let resent = sentBefore || sends > 1
        return (try await decide(kind, operation, reply, sent: sent, resent: resent, logger: log), reply)
    }

    /// What a reply to `operation` (sent as `kind`, with `sent`) decides, fetching the server's row when the
    /// reply does not carry it.
    func decide(
        _ kind: OperationKind, _ operation: PendingOperation, _ reply: HTTPResponseData, sent: JSONValue?,
        resent: Bool = false, logger: Logger
    ) async throws -> PushDecision {
        let item = reply.item
        let decision = PushDecision.decide(
            kind, status: reply.status, replyItem: item,
            server: PushDecision.serverRow(status: reply.status, replyBody: reply.json, replyItem: item), sent: sent,
            resent: resent)
        guard decision == .fetchServerItem else { return decision }
        let server = try await fetchServerRow(operation.table, operation.itemID, logger: logger)
        return PushDecision.decide(
            kind, status: reply.status, replyItem: item, server: server, sent: sent, resent: resent)
    }

    /// What an operation's frozen attempt sends: an update over a known base, under a dialect whose updates change
    /// fields (v2's `PATCH`), sends the id and the fields changed since the base — a cleared field as an explicit
    /// null, which a row without the field would not say; otherwise the row. Derived from the frozen row and the
    /// base, so a retry after a lost reply or a crash sends the same bytes.
    static func body(of operation: PendingOperation, sendsChanges: Bool) -> JSONValue? {
        guard let item = operation.attempt?.item else { return nil }
        guard sendsChanges, operation.kind == .update, !operation.recreatesItem, let base = operation.base else {
            return item
        }
        return FieldMerge.patch(item, since: base)
    }

    private func send(_ kind: OperationKind, _ operation: PendingOperation, body: JSONValue?, version: Version?)
        async throws -> HTTPResponseData
    {
        let features = version == nil ? ["OL"] : ["OC", "OL"]
        switch kind {
        case .insert:
            return try await endpoint.send("POST", endpoint.url(operation.table), body: body, features: ["OL"])
        case .update:
            // v2 sends the fields (the server keeps those it has and the client does not); v3 replaces the item
            // with the local row, which is whole: pulled rows are stored as they came.
            return try await endpoint.send(
                endpoint.wire.updateMethod, endpoint.url(operation.table, id: operation.itemID),
                body: body, ifMatch: version, features: features)
        case .delete:
            return try await endpoint.send(
                "DELETE", endpoint.url(operation.table, id: operation.itemID), ifMatch: version, features: features)
        }
    }

    /// Records a definitive refusal: the reply was read, so the operation is no longer frozen (a
    /// resolution decides what is sent next). A conflict handler may settle it at once.
    private func park(_ operation: PendingOperation, _ error: OperationError, resolutionsLeft: Int) async throws
        -> PushOutcome
    {
        var cleared = operation
        cleared.attempt = nil
        cleared.recreatesItem = false
        let settled = cleared
        if error.isConflict,
            try await merge(settled, with: error.serverItem, status: error.status, sent: operation.attempt?.item)
        {
            // Merged by itself: it goes again over the server's version, with no conflict shown.
            if resolutionsLeft > 0, let again = try await store.read({ try $0.operation(settled.id) }) {
                let outcome = try await pushOne(again, resolutionsLeft: resolutionsLeft - 1, sentBefore: false)
                if case .pushed = outcome { return .pushed(merged: true) }
                return outcome
            }
            return .waiting
        }
        let recorded = OperationError(
            operation: settled, status: error.status, message: error.message, sentItem: error.sentItem,
            serverItem: error.serverItem)
        try await store.write { writer in
            try writer.updateOperation(settled)
            try writer.saveError(recorded)
        }
        if recorded.isConflict, let conflictHandler {
            let resolution = try await conflictHandler.resolve(recorded)
            try await resolve(recorded, with: resolution)
            if resolutionsLeft > 0, resolution.retries,
                let again = try await store.read({ try $0.operation(settled.id) })
            {
                return try await pushOne(again, resolutionsLeft: resolutionsLeft - 1, sentBefore: false)
            }
            if resolution != .leave { return resolution.retries ? .waiting : .resolved }
        }
        return .failed(recorded)
    }

    /// Merges a conflicting update with the server's row, field by field over its base (``FieldMerge``): fields
    /// changed on one side only keep that side's value, and fields changed on both sides are decided by the table's
    /// ``FieldConflictPolicy`` — unless it surfaces them. The merged row becomes the local row, with the server's
    /// version, and the operation waits to go again with the server's row as its base, carrying a newer edit of the
    /// item waiting behind it too. Not merged: another kind, an update whose base is not known, a server row deleted
    /// or absent, a newer delete of the item waiting.
    ///
    /// `sent`: the row the operation's attempt sent. A field the server holds as sent, changed from the base, is this
    /// device's own change — the attempt was applied and its reply lost — not the server's: the merge takes it as the
    /// base's value, so a newer local edit of that field wins (else the merge kept the sent value, undoing it).
    ///
    /// - Returns: Whether it merged.
    private func merge(_ operation: PendingOperation, with theirs: JSONValue?, status: Int, sent: JSONValue?)
        async throws -> Bool
    {
        guard operation.kind == .update, operation.base != nil, let theirs, !theirs.isDeleted,
            status == 409 || status == 412
        else { return false }
        let policy = fieldConflicts[operation.table.canonical] ?? .surface
        let merged = try await store.write { writer -> Bool in
            guard var current = try writer.operation(operation.id), current.kind == .update,
                let base = current.base.map({ FieldMerge.base($0, sent: sent, theirs: theirs) }),
                let last = try writer.lastOperation(for: operation.itemID, in: operation.table),
                last.id == current.id || (last.kind == .update && last.attempt == nil),
                let mine = try writer.item(operation.itemID, in: operation.table),
                let merged = FieldMerge.merge(base: base, mine: mine, theirs: theirs, policy: policy)
            else { return false }
            // A newer edit waiting behind this one: the local row holds both, so the merge carries both, and this
            // operation, no longer frozen, sends them (as a later edit collapses into an update not yet sent).
            if last.id != current.id { try writer.removeOperation(last.id) }
            try writer.upsert(merged, in: operation.table)
            current.attempt = nil
            current.recreatesItem = false
            current.base = theirs
            try writer.updateOperation(current)
            try writer.removeError(operationID: current.id)
            return true
        }
        if merged {
            logger.debug(
                "A conflict merged by itself",
                metadata: [SyncLogKey.table: "\(operation.table)", "sync.item": "\(operation.itemID)"])
        }
        return merged
    }

    /// Removes a pushed operation and stores the server's item, unless a newer operation for the item
    /// was queued meanwhile: then only the server's version is taken, for the next precondition.
    private func complete(_ operation: PendingOperation, serverItem: JSONValue?) async throws {
        try await store.write { writer in try Self.complete(operation, serverItem: serverItem, writer: writer) }
    }

    /// ``complete(_:serverItem:)`` in the caller's transaction.
    static func complete(_ operation: PendingOperation, serverItem: JSONValue?, writer: LocalStoreWriter) throws {
        try writer.removeOperation(operation.id)
        try applyServerRow(serverItem, for: operation, writer: writer)
    }

    /// Stores the server's current row after `operation` left the queue (nil or a tombstone: the local
    /// row goes). When a newer operation for the item waits, the local change wins until it is pushed:
    /// the local row takes the server's version, and the fields the server changed that the newer edit
    /// did not (see ``mergeServerChanges(_:sent:into:)``; after a resolution that sent nothing, the newer update's
    /// changes since its base, ``FieldMerge``).
    static func applyServerRow(_ serverItem: JSONValue?, for operation: PendingOperation, writer: LocalStoreWriter)
        throws
    {
        let table = operation.table
        // Newer edits of the item: one, or several when change sets' boundaries keep them apart.
        let waiting = try writer.operations(for: operation.itemID, in: table)
        if var newer = waiting.last, let next = waiting.first {
            guard let serverItem, let version = serverItem["version"], !serverItem.isDeleted else { return }
            if newer.kind == .delete {
                newer.item?["version"] = version
                try writer.updateOperation(newer)
            } else if var row = try writer.item(operation.itemID, in: table) {
                if operation.attempt == nil, next.kind == .update, next.attempt == nil, let base = next.base {
                    // Nothing the settled operation sent is on the server (a conflict taken or discarded): the newer
                    // edits' own changes, since the first one's base, go over the server's row. When one meets a
                    // change of the server's, the row and the newer operations stay as they are: they meet that
                    // conflict themselves.
                    let outcome = FieldMerge.merge(base: base, mine: row, theirs: serverItem)
                    guard outcome.conflicts.isEmpty else { return }
                    // The user fields merged; the system properties stay the local row's, with the server's version
                    // (below), as after any settled operation with a newer one waiting.
                    let merged = outcome.merged.userFields.objectValue ?? [:]
                    for name in Set(row.userFields.objectValue?.keys ?? [:].keys).union(merged.keys) {
                        row[name] = merged[name]
                    }
                } else if let sent = operation.attempt?.item {
                    guard let merged = mergeServerChanges(serverItem, sent: sent, into: row) else { return }
                    row = merged
                }
                row["version"] = version
                try writer.upsert(row, in: table)
                // The newer updates' changes are now those since the server's row.
                for var update in waiting where update.kind == .update && update.attempt == nil && update.base != nil {
                    update.base = serverItem
                    try writer.updateOperation(update)
                }
            }
        } else if let serverItem, !serverItem.isDeleted {
            try writer.upsert(serverItem, in: table)
        } else {
            try writer.deleteItem(operation.itemID, in: table)
        }
    }

    /// The local row of an item whose newer edit waits, with what the server's row changed since `sent`
    /// (the body of the operation just settled) in the fields the newer edit left as sent. Without them the
    /// newer edit would undo another device's change unseen: the server's row of a retried operation whose
    /// reply was lost may hold another device's later write (converged: it holds every field sent), and a v3
    /// update replaces the whole row. A field both changed that was sent empty (null or absent) — another
    /// device's value against the newer edit's — is a conflict the newer operation must meet: nil, and the
    /// local row keeps its older version for its precondition. (A converged row holds every field sent, so a
    /// sent value the server holds otherwise is its own form of it in a 2xx reply: the newer edit's stands.)
    static func mergeServerChanges(_ server: JSONValue, sent: JSONValue, into row: JSONValue) -> JSONValue? {
        guard let theirs = server.userFields.objectValue else { return row }
        var merged = row
        for (name, value) in theirs {
            let base = sent[name] ?? .null
            guard value != base else { continue }
            let mine = row[name] ?? .null
            if mine == base {
                merged[name] = value
            } else if mine != value, base == .null {
                return nil
            }
        }
        return merged
    }
}

extension ConflictResolution {
    /// Whether the operation is pushed again after this resolution.
    var retries: Bool {
        switch self {
        case .keepMine, .changeKind: true
        default: false
        }
    }
}
