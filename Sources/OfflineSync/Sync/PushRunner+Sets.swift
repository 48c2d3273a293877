import Foundation
import Logging
import SyncCore

extension PushRunner {
    /// How many times one push sends a change set whose conflicts were merged or resolved by the handler.
    static let setRounds = 3

    /// Pushes the operations of one change set (``SyncClient/changeSet(_:)``) as one atomic batch (docs/batch.md): the
    /// server applies them all or none.
    ///
    /// - Applied: every member is completed, in one local transaction.
    /// - Refused: nothing was applied. A member answered 409/412 that the decision reads as *applied before* (a
    ///   replay of a set whose reply was lost: every member says so) is not a failure; when every member is such,
    ///   the set is complete. When only some are, the server holds their effect by other writes: they are completed,
    ///   and the set goes on without them. Each failed member is settled without being sent again — merged by itself,
    ///   resolved by the conflict handler, or parked with its error — and the members answered 424 wait with them.
    ///   When none is left parked, the set goes again (at most ``setRounds`` times in a push); when one is, every
    ///   member's item waits for the next push after its resolution.
    /// - A member answered 5xx makes the whole answer transient: the set is sent again after a wait, as one request
    ///   would be.
    /// - When the server offers no atomic batches (or the set is past its limits),
    ///   ``SyncClient/Configuration/changeSetsWithoutAtomicServer`` decides.
    func pushSet(_ members: [PendingOperation], result: inout PushResult, blocked: inout Set<String>) async throws {
        let keys = Set(members.map(\.key))
        var ids = members.map(\.id)
        var sentBefore = Set(members.filter(\.isAttempted).map(\.id))
        for _ in 0..<Self.setRounds {
            if Task.isCancelled { throw SyncStop.cancelled }
            let frozen = try await store.write { [ids, account] writer in
                try account.confirm(in: writer)
                return try ids.compactMap { try Self.freeze($0, writer: writer) }
            }
            guard !frozen.isEmpty else { return }
            ids = frozen.map(\.id)
            try await learnBatchOffer(frozen[0].table)
            let resent = sentBefore
            let body = { (again: Bool) -> JSONValue in
                let requests = frozen.map { batchRequest($0, resent: again || resent.contains($0.id)) }
                return ["atomic": true, "requests": .array(requests)]
            }
            // Measured in its largest form (a resend's floors included), so that sending it again stays within.
            guard let limits = endpoint.batchOffer.limits, limits.atomic, frozen.count <= limits.operations,
                body(true).serializedData().count <= limits.bytes
            else {
                try await pushSetWithoutAtomicServer(frozen, sentBefore: sentBefore, result: &result, blocked: &blocked)
                return
            }
            guard let (answers, sends) = try await sendSet(body, count: frozen.count) else { continue }
            var decided: [SetMember] = []
            for (operation, answer) in zip(frozen, answers) {
                let reply = Self.reply(answer)
                let decision: PushDecision =
                    reply.status == 424
                    ? .refused
                    : try await decide(
                        operation.kind, operation, reply, sent: Self.body(of: operation, sendsChanges: true),
                        resent: sends > 1 || sentBefore.contains(operation.id), logger: logger)
                decided.append(SetMember(operation: operation, decision: decision, reply: reply))
            }
            let (completed, waits) = try await settleSet(decided, result: &result)
            if completed == decided.count { return }
            let done = Set(decided.filter(\.decision.isSuccess).map(\.operation.id))
            ids.removeAll { done.contains($0) }
            if waits { break }
            sentBefore = []
        }
        blocked.formUnion(keys)
    }

    /// A member of a set the server answered, with what its answer decides.
    struct SetMember {
        var operation: PendingOperation
        var decision: PushDecision
        var reply: HTTPResponseData
    }

    /// Sends a set as one atomic batch until an answer that is not transient.
    ///
    /// - Parameters:
    ///   - body: The batch; `again` when an earlier send of it may have been applied.
    ///   - count: How many members it holds.
    /// - Returns: Each member's answer and how many times the set was sent; nil when the server refused the atomic
    ///   batch as a whole (an older server behind the same address: the offer is withdrawn).
    private func sendSet(_ body: (_ again: Bool) -> JSONValue, count: Int) async throws -> (
        answers: [JSONValue], sends: Int
    )? {
        var sends = 0
        let reply = try await sendRetrying(logger: logger) {
            sends += 1
            return try await endpoint.send("POST", endpoint.batchURL, body: body(sends > 1), features: ["OL"])
        } isTransient: { reply in
            guard !isTransientStatus(reply.status) else { return true }
            guard (200..<300).contains(reply.status) else { return false }
            // Cut short, or a member met a failure of the server's (the set was undone): sent again.
            guard let answers = Self.answers(reply, count), answers.count == count else { return true }
            return answers.contains { isTransientStatus(Int($0["status"]?.intValue ?? 0)) }
        }
        guard reply.json?["atomic"] == true, let answers = Self.answers(reply, count), answers.count == count else {
            logger.notice("The server refused an atomic batch", metadata: [SyncLogKey.status: "\(reply.status)"])
            endpoint.batchOffer.withdraw()
            return nil
        }
        return (answers, sends)
    }

    /// Records a set's answers: applied, every member is completed; refused, the members read as applied are completed
    /// (see ``pushSet(_:result:blocked:)``) and every other failed member is settled without being sent again.
    ///
    /// - Returns: How many members were completed, and whether one is parked (then the set waits for the next push).
    private func settleSet(_ decided: [SetMember], result: inout PushResult) async throws -> (
        completed: Int, waits: Bool
    ) {
        let succeeded = decided.compactMap { member -> (PendingOperation, JSONValue?)? in
            guard case .succeeded(let item) = member.decision else { return nil }
            return (member.operation, item)
        }
        try await complete(succeeded, result: &result)
        if succeeded.count == decided.count {
            result.changeSetsPushed += 1
            return (succeeded.count, false)
        }
        result.changeSetsRefused += 1
        logger.info("The server refused a change set", metadata: [SyncLogKey.operations: "\(decided.count)"])
        // A member read as applied in a set that was not (another member failed, the rest 424) holds on the server by
        // another write: its effect is there, so it is complete, and the rest of the set goes without it. Sent again
        // unchanged, it would read the same forever.
        var waits = false
        for member in decided where member.reply.status != 424 && !member.decision.isSuccess {
            if member.decision == .unauthorized { throw SyncStop.unauthorized }
            let outcome = try await settle(member.operation, member.decision, member.reply, resolutionsLeft: 0)
            if case .failed(let error) = outcome {
                result.errors.append(error)
                waits = true
            }
        }
        return (succeeded.count, waits)
    }

    /// A change set the server cannot apply atomically: sent as separate operations, or reported and kept, as the
    /// configuration says.
    private func pushSetWithoutAtomicServer(
        _ members: [PendingOperation], sentBefore: Set<Int64>, result: inout PushResult, blocked: inout Set<String>
    ) async throws {
        switch changeSetFallback {
        case .sendSeparately:
            logger.debug(
                "Sending a change set as separate operations", metadata: [SyncLogKey.operations: "\(members.count)"])
            try await pushBatch(members, result: &result, blocked: &blocked)
        case .refuse:
            for operation in members {
                result.errors.append(
                    OperationError(
                        operation: operation, status: 501,
                        message: "The server does not apply change sets atomically (no 'atomic' batches, or the set "
                            + "is past its batch limits); the set stays queued. Configuration."
                            + "changeSetsWithoutAtomicServer = .sendSeparately sends it one operation at a time.",
                        sentItem: operation.attempt?.item ?? operation.item, serverItem: nil))
            }
            blocked.formUnion(members.map(\.key))
        }
    }

    /// Makes sure the server's batch offer is known before a set is sent: one cheap read of the table when no
    /// response has said it yet (a new client's first push), unless batches are off.
    private func learnBatchOffer(_ table: TableName) async throws {
        guard endpoint.batchOffer.limits == nil, endpoint.batchOffer.mayBeOffered, !endpoint.batchOffer.asked else {
            return
        }
        endpoint.batchOffer.markAsked()
        _ = try await sendRetrying(logger: logger) {
            try await endpoint.send("GET", endpoint.url(table, query: "$top=0"), features: ["OL"])
        }
    }
}
