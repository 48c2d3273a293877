import Foundation
import Logging
import SyncCore

extension PushRunner {
    /// Pushes `operations` (of distinct items, none re-creating its item) through the server's batch endpoint
    /// (docs/batch.md), as many per request as its limits allow, and records each outcome as a single push
    /// would: every answer is decided by the same rules (PROTOCOL.md §7), successes are stored together.
    ///
    /// An answer that is transient (5xx: the server stopped there) or 401 sends that operation alone, with the
    /// single path's retries and token refresh; the operations after it go in the next batch. A batch the
    /// server refuses as a whole (it no longer offers them) withdraws the offer, and the rest go one by one.
    func pushBatch(_ operations: [PendingOperation], result: inout PushResult, blocked: inout Set<String>)
        async throws
    {
        // Sent by an earlier push that read no reply: a 409 on such an insert means it landed.
        let sentBefore = Set(operations.filter(\.isAttempted).map(\.id))
        var pending = try await store.write { [account] writer in
            try account.confirm(in: writer)
            return try operations.compactMap { try Self.freeze($0.id, writer: writer) }
        }[...]
        while let first = pending.first {
            if Task.isCancelled { throw SyncStop.cancelled }
            guard let limits = endpoint.batchOffer.limits else {
                let outcome = try await pushOne(
                    first, resolutionsLeft: 1, sentBefore: sentBefore.contains(first.id))
                Self.record(outcome, of: first, in: &result, blocked: &blocked)
                pending = pending.dropFirst()
                continue
            }
            let count = batchCount(pending, limits)
            let members = Array(pending.prefix(count))
            guard
                let (answers, sends) = try await sendBatch(
                    count: count,
                    body: { again in
                        members.map { batchRequest($0, resent: again || sentBefore.contains($0.id)) }
                    })
            else {
                endpoint.batchOffer.withdraw()
                continue
            }
            logger.trace("Batch answered", metadata: [SyncLogKey.operations: "\(answers.count)"])
            let answered = Array(pending.prefix(answers.count))
            pending = pending.dropFirst(answers.count)
            let stoppedAt = try await record(
                answers, of: answered, sends: sends, sentBefore: sentBefore, result: &result, blocked: &blocked)
            // The server stopped at an operation (a transient answer): those after it go in the next batch.
            if let stoppedAt { pending = answered[(stoppedAt + 1)...] + pending }
        }
    }

    /// How many of `pending` the next batch holds: the first, in order, while within the server's limits — each
    /// request measured in its largest form, a resend's floor included, so that sending it again stays within them.
    private func batchCount(_ pending: ArraySlice<PendingOperation>, _ limits: BatchOffer.Limits) -> Int {
        var count = 0
        var bytes = 16
        for operation in pending.prefix(limits.operations) {
            let size = batchRequest(operation, resent: true).serializedData().count + 1
            if count > 0, bytes + size > limits.bytes { break }
            count += 1
            bytes += size
        }
        return count
    }

    /// Sends a batch until an answer that is not transient; a success without a readable list of answers was cut
    /// short and is sent again, as a single push would be.
    ///
    /// - Parameters:
    ///   - count: How many operations it holds.
    ///   - body: Its requests; `again` when an earlier send of the batch may have been applied.
    /// - Returns: The answers and how many times the batch was sent; nil when the server refused the batch as a whole
    ///   (it no longer offers them: the rest go one by one).
    private func sendBatch(count: Int, body: (_ again: Bool) -> [JSONValue]) async throws -> (
        answers: [JSONValue], sends: Int
    )? {
        var sends = 0
        let reply = try await sendRetrying(logger: logger) {
            sends += 1
            let requests: JSONValue = ["requests": .array(body(sends > 1))]
            return try await endpoint.send("POST", endpoint.batchURL, body: requests, features: ["OL"])
        } isTransient: { reply in
            isTransientStatus(reply.status)
                || ((200..<300).contains(reply.status) && Self.answers(reply, count) == nil)
        }
        guard let answers = Self.answers(reply, count) else {
            logger.notice(
                "The server refused a batch; pushing one operation per request",
                metadata: [SyncLogKey.status: "\(reply.status)"])
            return nil
        }
        return (answers, sends)
    }

    /// Records a batch's answers in order, each decided as a single push's reply; successes are completed together.
    /// An answer that is transient or 401 sends that operation alone, with the single path's retries and token refresh.
    ///
    /// - Returns: The index of the operation the server stopped at (a transient answer), if it did: the answers after
    ///   it were not read.
    private func record(
        _ answers: [JSONValue], of operations: [PendingOperation], sends: Int, sentBefore: Set<Int64>,
        result: inout PushResult, blocked: inout Set<String>
    ) async throws -> Int? {
        var succeeded: [(PendingOperation, JSONValue?)] = []
        for (index, (operation, answer)) in zip(operations, answers).enumerated() {
            let reply = Self.reply(answer)
            let resent = sends > 1 || sentBefore.contains(operation.id)
            let decision = try await decide(
                operation.kind, operation, reply, sent: Self.body(of: operation, sendsChanges: true), resent: resent,
                logger: logger)
            if case .succeeded(let serverItem) = decision {
                succeeded.append((operation, serverItem))
                continue
            }
            try await complete(succeeded, result: &result)
            succeeded = []
            let outcome =
                switch decision {
                case .retry: try await pushOne(operation, resolutionsLeft: 1, sentBefore: true)
                case .unauthorized: try await pushOne(operation, resolutionsLeft: 1, sentBefore: resent)
                default: try await settle(operation, decision, reply, resolutionsLeft: 1)
                }
            Self.record(outcome, of: operation, in: &result, blocked: &blocked)
            if case .retry = decision { return index }
        }
        try await complete(succeeded, result: &result)
        return nil
    }

    /// Completes pushed operations in one transaction.
    func complete(_ pushed: [(PendingOperation, JSONValue?)], result: inout PushResult) async throws {
        guard !pushed.isEmpty else { return }
        try await store.write { writer in
            for (operation, serverItem) in pushed {
                try Self.complete(operation, serverItem: serverItem, writer: writer)
            }
        }
        result.pushedCount += pushed.count
    }

    /// Counts an outcome; an operation that failed or waits for the next push blocks the later operations of its item.
    static func record(
        _ outcome: PushOutcome, of operation: PendingOperation, in result: inout PushResult,
        blocked: inout Set<String>
    ) {
        switch outcome {
        case .pushed(let merged):
            result.pushedCount += 1
            if merged { result.mergedCount += 1 }
        case .failed(let error):
            result.errors.append(error)
            blocked.insert(operation.key)
        case .waiting: blocked.insert(operation.key)
        case .resolved, .skipped: break
        }
    }

    /// One operation of a batch: the request its frozen attempt makes as a single push.
    func batchRequest(_ operation: PendingOperation, resent: Bool) -> JSONValue {
        var request: [String: JSONValue] = [:]
        let attempt = operation.attempt
        switch operation.kind {
        case .insert:
            request = ["method": "POST", "url": .string(endpoint.path(operation.table))]
            let headers = Self.resendHeaders(resent ? attempt?.floor : nil)
            if !headers.isEmpty { request["headers"] = .object(headers.mapValues(JSONValue.string)) }
        case .update:
            request = ["method": "PATCH", "url": .string(endpoint.path(operation.table, id: operation.itemID))]
        case .delete:
            request = ["method": "DELETE", "url": .string(endpoint.path(operation.table, id: operation.itemID))]
        }
        if operation.kind != .insert, let version = attempt?.version {
            request["headers"] = ["If-Match": .string(version.entityTag)]
        }
        if operation.kind != .delete, let body = Self.body(of: operation, sendsChanges: true) { request["body"] = body }
        return .object(request)
    }

    /// The answers of a batch reply of `count` operations: at least one, at most `count` (nil otherwise).
    static func answers(_ reply: HTTPResponseData, _ count: Int) -> [JSONValue]? {
        guard reply.status == 200, let answers = reply.json?["responses"]?.arrayValue, !answers.isEmpty,
            answers.count <= count, answers.allSatisfy({ $0["status"]?.intValue != nil })
        else { return nil }
        return answers
    }

    /// A batch answer as the response a single request would have had.
    static func reply(_ answer: JSONValue) -> HTTPResponseData {
        var headers: [String: String] = [:]
        for (name, value) in answer["headers"]?.objectValue ?? [:] { headers[name] = value.stringValue }
        return HTTPResponseData(
            status: Int(answer["status"]?.intValue ?? 0), headers: headers,
            body: answer["body"].map { $0.serializedData() } ?? Data())
    }
}

extension PendingOperation {
    /// `table/id`: the later operations of an item wait while an earlier one failed.
    var key: String { "\(table.canonical)/\(itemID.rawValue)" }
}
