public import SyncCore

/// What a push did.
public struct PushResult: Sendable, Hashable {
    /// Operations the server accepted (and removed from the queue).
    public var pushedCount: Int
    /// Operations the server refused in this push, kept with their operations.
    public var errors: [OperationError]
    /// Of the operations accepted, those that met a conflict first and were merged field by field with the
    /// server's row with no conflict shown (<doc:HandlingConflicts>): the changes of other devices they kept.
    public var mergedCount: Int
    /// Change sets (``SyncClient/changeSet(_:)``) the server applied as a whole in this push.
    public var changeSetsPushed = 0
    /// Times the server refused a change set as a whole in this push (a member's conflict or refusal; nothing of the
    /// set was applied). A set merged or resolved and then applied counts here and in ``changeSetsPushed``.
    public var changeSetsRefused = 0

    /// Creates a result.
    ///
    /// - Parameters:
    ///   - pushedCount: Operations accepted.
    ///   - errors: Operations refused.
    ///   - mergedCount: Operations accepted after a merge.
    public init(pushedCount: Int = 0, errors: [OperationError] = [], mergedCount: Int = 0) {
        self.pushedCount = pushedCount
        self.errors = errors
        self.mergedCount = mergedCount
    }
}

/// Why a push did not complete. Every operation not pushed stays queued; nothing is lost.
public enum PushError: Error, Sendable, CustomStringConvertible {
    /// The server refused some operations in this push (conflicts and refusals, parked until
    /// resolved: see ``SyncClient/operationErrors()``). The others were pushed.
    case operationsFailed(PushResult)
    /// The server could not be reached or could not do the work now, even after retries; the push
    /// stopped at the operation it could not send, and nothing was recorded against any operation.
    case serverUnavailable(ServerUnavailableError, PushResult)
    /// The server answered 401 even after asking the token provider again; the push stopped.
    case unauthorized(PushResult)
    /// The caller cancelled; the push stopped between operations.
    case cancelled(PushResult)

    /// What was done before the push stopped or finished.
    public var result: PushResult {
        switch self {
        case .operationsFailed(let result), .serverUnavailable(_, let result), .unauthorized(let result),
            .cancelled(let result):
            result
        }
    }

    /// One line, without item contents.
    public var description: String {
        switch self {
        case .operationsFailed(let result):
            "Push finished with \(result.errors.count) refused operation(s); \(result.pushedCount) pushed"
        case .serverUnavailable(let error, let result): "\(error); \(result.pushedCount) pushed before it stopped"
        case .unauthorized(let result): "The server refused the credentials (401); \(result.pushedCount) pushed"
        case .cancelled(let result): "Push cancelled; \(result.pushedCount) pushed"
        }
    }
}

/// The server could not be reached, or could not do the work now, after the retries of
/// ``SyncClient/Configuration/retryLimit``: a transient failure, never recorded against an operation.
/// Sync again later; nothing is lost.
public struct ServerUnavailableError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the last attempt met.
    public enum Reason: Sendable, Hashable {
        /// No reply: unreachable, timed out, or the connection was lost before the reply was complete.
        case noReply(TransportError)
        /// A status that means "not now": 5xx, 408 or 429.
        case status(Int)
        /// A success status whose body could not be read as what was asked for (cut short or garbled).
        case unreadableReply(status: Int)
    }

    /// What the last attempt met.
    public var reason: Reason
    /// How many requests were tried.
    public var attempts: Int

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - reason: What the last attempt met.
    ///   - attempts: How many requests were tried.
    public init(_ reason: Reason, attempts: Int) {
        self.reason = reason
        self.attempts = attempts
    }

    /// One line, such as `Server unavailable (HTTP 503) after 3 attempts`.
    public var description: String {
        let tries = attempts == 1 ? "" : " after \(attempts) attempts"
        switch reason {
        case .noReply(let error): return "\(error)\(tries)"
        case .status(let status): return "Server unavailable (HTTP \(status))\(tries)"
        case .unreadableReply(let status): return "Server sent an unreadable reply (HTTP \(status))\(tries)"
        }
    }
}

/// What a pull did.
public struct PullSummary: Sendable, Hashable {
    /// Rows that changed the local store: written with a version it did not have, or deleted.
    /// Rows it already had, and tombstones of rows it never had, are not counted.
    public var appliedCount: Int
    /// Rows skipped because the item has a pending local operation or a parked operation error.
    public var skippedCount: Int
    /// Requests made.
    public var requestCount: Int
    /// Rows removed from the device because they left the user's scope on the server — a shared group the user was
    /// removed from or left, a claim that changed — without being deleted there (rows with pending operations stay,
    /// with the operations' refusals to tell).
    public var removedCount = 0
    /// Listings the pull made because the server had removed tombstones its cursor had not seen (a device offline
    /// longer than the table's tombstone retention, docs/retention.md): 0 on a device that syncs within it.
    public var reconciliations = 0
    /// Rows those listings removed from the device: deleted on the server while it was away, their tombstones gone
    /// since (rows with pending operations stay, their push telling the app).
    public var reconciledCount = 0
    /// Operations that the push before the pull left refused (new in that push). They do not stop
    /// the pull (PROTOCOL.md §8); ``SyncClient/operationErrors()`` lists every waiting one.
    public var pushErrors: [OperationError] = []
}

/// What a pull of several tables together did (``SyncClient/pullTogether(_:passes:progress:)``).
public struct JointPullSummary: Sendable, Hashable {
    /// One table's part of the pull.
    public struct Table: Sendable, Hashable {
        /// The table.
        public var table: TableName
        /// What the pull did to it. Its `requestCount` counts every pass.
        public var summary: PullSummary
    }

    /// Each table's summary, in the order pulled.
    public var tables: [Table]
    /// The passes over the tables it took: the last found nothing new, unless ``isWhole`` is false.
    public var passes: Int
    /// Whether the pull applied what it received: a pass found nothing new in any table, so every change set is whole.
    /// False when writes on the server never paused for the passes allowed: then nothing was applied (the tables show
    /// what they showed, whole, and their cursors are where they were) and the next pull tries again.
    public var isWhole: Bool

    /// The summaries added up, as one pull's: the push's refusals are the first table's.
    public var total: PullSummary {
        var total = PullSummary(appliedCount: 0, skippedCount: 0, requestCount: 0)
        for summary in tables.map(\.summary) {
            total.appliedCount += summary.appliedCount
            total.skippedCount += summary.skippedCount
            total.requestCount += summary.requestCount
            total.removedCount += summary.removedCount
            total.reconciliations += summary.reconciliations
            total.reconciledCount += summary.reconciledCount
            total.pushErrors += summary.pushErrors
        }
        return total
    }
}

/// Progress of a long pull.
public struct PullProgress: Sendable, Hashable {
    /// Rows received so far.
    public var appliedCount: Int
    /// Rows to pull in all, when the server reported a count.
    public var totalCount: Int?
}

/// Why a pull failed. Pages applied before the failure are kept; a later pull resumes.
public enum PullError: Error, Sendable, CustomStringConvertible {
    /// The server refused the pull's query (a definitive 4xx).
    case rejected(status: Int, message: String?)
    /// A row came back without a usable `id` or `updatedAt`, so the cursor cannot advance.
    case invalidRow(String)
    /// The server could not be reached or could not do the work now, even after retries (in the
    /// pull, or in the push before it).
    case serverUnavailable(ServerUnavailableError)
    /// The server answered 401 even after asking the token provider again.
    case unauthorized
    /// The caller cancelled.
    case cancelled

    /// One line.
    public var description: String {
        switch self {
        case .rejected(let status, let message): "The server refused the pull (\(status)): \(message ?? "no message")"
        case .invalidRow(let reason): "The server sent an unusable row: \(reason)"
        case .serverUnavailable(let error): "\(error)"
        case .unauthorized: "The server refused the credentials (401)"
        case .cancelled: "Pull cancelled"
        }
    }
}

/// How purge treats pending operations.
public enum PurgeMode: Sendable, Hashable {
    /// Refuse to purge a table with pending operations.
    case refuseIfPending
    /// Purge anyway, dropping the table's pending operations and their errors.
    /// - Warning: Local changes not yet pushed are lost.
    case evenIfPending
}

/// Why a purge was refused.
public struct PurgeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The table.
    public var table: TableName
    /// Its pending operations.
    public var pendingCount: Int

    /// One line.
    public var description: String {
        "\(table) has \(pendingCount) pending operation(s); push first, or purge with .evenIfPending to drop them"
    }
}
