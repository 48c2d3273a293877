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
                version: operation.kind == .update ? row.version : nil,
                floor: operation.kind == .insert ? try resendFloor(in: operation.table, writer: writer) : nil)
        }
        try writer.updateOperation(operation)
        return operation
    }

    /// How far back an insert's first send may be stamped, at most, when the store holds no later stamp of its table:
    /// the device's clock may be ahead of the server's by this much and the floor stays below the server's stamp.
    static let clockAllowance: Duration = .seconds(3600)

    /// An insert's ``PendingOperation/Attempt/floor``: the newest server stamp the store holds of the table, or the
    /// device's clock less ``clockAllowance`` when that is later (a device away for long holds only old stamps, and a
    /// floor that old would refuse inserts that never landed whenever tombstones were removed since).
    static func resendFloor(in table: TableName, writer: LocalStoreWriter) throws -> WireDate {
        let clock = WireDate(Date()).millisecondsSince1970 - Int64(clockAllowance.components.seconds) * 1000
        let stored = try writer.newestServerStamp(in: table)?.millisecondsSince1970 ?? .min
        return WireDate(millisecondsSince1970: max(clock, stored))
    }

    /// The header of an insert sent again when an earlier send may have landed: its floor
    /// (``PendingOperation/Attempt/floor``), when it has one.
    static func resendHeaders(_ floor: WireDate?) -> [String: String] {
        floor.map { ["X-Sync-Resend-Floor": $0.description] } ?? [:]
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
            let floor = sentBefore || sends > 1 ? attempt.floor : nil
            return try await send(kind, operation, body: sent, version: version, resendFloor: floor)
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

    private func send(
        _ kind: OperationKind, _ operation: PendingOperation, body: JSONValue?, version: Version?,
        resendFloor: WireDate?
    ) async throws -> HTTPResponseData {
        let features = version == nil ? ["OL"] : ["OC", "OL"]
        switch kind {
        case .insert:
            return try await endpoint.send(
                "POST", endpoint.url(operation.table), body: body, features: ["OL"],
                extraHeaders: Self.resendHeaders(resendFloor))
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
}
