public import SyncCore

/// What a push did.
public struct PushResult: Sendable, Hashable {
    /// Operations the server accepted (and removed from the queue).
    public var pushedCount: Int
    /// Operations the server refused in this push, kept with their operations.
    public var errors: [OperationError]

    /// Creates a result.
    ///
    /// - Parameters:
    ///   - pushedCount: Operations accepted.
    ///   - errors: Operations refused.
    public init(pushedCount: Int = 0, errors: [OperationError] = []) {
        self.pushedCount = pushedCount
        self.errors = errors
    }
}

/// Why a push did not complete. Every operation not pushed stays queued; nothing is lost.
public enum PushError: Error, Sendable, CustomStringConvertible {
    /// The server refused some operations (conflicts stay parked until resolved; other failures are
    /// tried again by the next push). The others were pushed.
    case operationsFailed(PushResult)
    /// The server could not be reached; the push stopped at the first operation it could not send.
    case networkUnavailable(TransportError, PushResult)
    /// The server answered 401 even after asking the token provider again; the push stopped.
    case unauthorized(PushResult)
    /// The caller cancelled; the push stopped between operations.
    case cancelled(PushResult)

    /// What was done before the push stopped or finished.
    public var result: PushResult {
        switch self {
        case .operationsFailed(let result), .networkUnavailable(_, let result), .unauthorized(let result),
            .cancelled(let result):
            result
        }
    }

    /// One line, without item contents.
    public var description: String {
        switch self {
        case .operationsFailed(let result):
            "Push finished with \(result.errors.count) refused operation(s); \(result.pushedCount) pushed"
        case .networkUnavailable(let error, let result): "\(error); \(result.pushedCount) pushed before it stopped"
        case .unauthorized(let result): "The server refused the credentials (401); \(result.pushedCount) pushed"
        case .cancelled(let result): "Push cancelled; \(result.pushedCount) pushed"
        }
    }
}

/// What a pull did.
public struct PullSummary: Sendable, Hashable {
    /// Rows written or deleted locally.
    public var appliedCount: Int
    /// Rows skipped because the item has a pending local operation.
    public var skippedCount: Int
    /// Requests made.
    public var requestCount: Int
}

/// Progress of a long pull.
public struct PullProgress: Sendable, Hashable {
    /// Rows applied so far.
    public var appliedCount: Int
    /// Rows to pull in all, when the server reported a count.
    public var totalCount: Int?
}

/// Why a pull failed.
public enum PullError: Error, Sendable, CustomStringConvertible {
    /// The implicit push before the pull did not complete; the pull did not start.
    case pushFailed(PushError)
    /// The server refused the pull's query.
    case rejected(status: Int, message: String?)
    /// A row came back without a usable `id` or `updatedAt`, so the cursor cannot advance.
    case invalidRow(String)
    /// The server could not be reached; pages applied so far are kept and a later pull resumes.
    case networkUnavailable(TransportError)

    /// One line.
    public var description: String {
        switch self {
        case .pushFailed(let error): "Pull cancelled: the push before it did not complete (\(error))"
        case .rejected(let status, let message): "The server refused the pull (\(status)): \(message ?? "no message")"
        case .invalidRow(let reason): "The server sent an unusable row: \(reason)"
        case .networkUnavailable(let error): "\(error)"
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
