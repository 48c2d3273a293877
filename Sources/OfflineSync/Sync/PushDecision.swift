import SyncCore

/// What a push does with the reply to one operation (PROTOCOL.md §7), as a pure function of the
/// operation's kind, the reply and what was sent. The push only performs the decision.
///
/// | kind | reply | decision |
/// |---|---|---|
/// | any | 5xx, 408, 429 | retry (transient; after the last retry the push stops: server unavailable) |
/// | any | 401 | unauthorized (the push stops) |
/// | insert, update | 2xx with the item | succeeded |
/// | insert, update | 2xx without a readable item | retry (the reply was cut short or is unreadable) |
/// | delete | 2xx, 404 or 410 | succeeded (404, 410: already gone) |
/// | insert | 409 | the server's row (fetched by id when the body lacks `version`/`updatedAt`): live and holding every field sent (the server may add its own, as a per-user table's `userId`) → succeeded (a lost reply's retry); live, and an earlier send of the insert may have been applied (`resent`) → succeeded (the insert landed and another device changed the item since: the server's row is the item, and later local edits merge over it with the insert as their base); else conflict |
/// | insert | 410 | sent again after a lost reply (`X-Sync-Resend-Floor`), and the server may have removed the item's tombstone (docs/retention.md): the server's row, fetched by id — none → conflict (the item may have been deleted meanwhile); else as a 409 |
/// | update | 409, 412 | the server's row as above: live and holding every field sent → succeeded; else conflict |
/// | update | 404, 410 | conflict with the server's tombstone, fetched by id (or none) |
/// | delete | 409, 412 | the server's row as above: deleted → succeeded; else conflict |
/// | any | other 4xx, 1xx, 3xx | refused (parked until resolved) |
enum PushDecision: Sendable, Equatable {
    /// Transient: send again after a wait.
    case retry
    /// The credentials were refused: stop the push.
    case unauthorized
    /// The reply does not carry the server's row: fetch it by id, then decide with it.
    case fetchServerItem
    /// Done: store the server's item (nil when there is none to store).
    case succeeded(serverItem: JSONValue?)
    /// A conflict, parked with the server's current item (nil when the server has no trace of it).
    case conflict(serverItem: JSONValue?)
    /// A definitive refusal, parked with the server's message.
    case refused

    /// Whether the operation is done (``succeeded(serverItem:)``).
    var isSuccess: Bool {
        if case .succeeded = self { return true }
        return false
    }

    /// What the server knows of the item, from the reply or a fetch by id.
    enum ServerRow: Sendable, Equatable {
        /// Not known yet: the reply's body is not the server's row.
        case unknown
        /// The server has no trace of the item (a fetch answered 404).
        case absent
        /// The server's current row (perhaps a tombstone).
        case row(JSONValue)
    }

    /// Decides what to do with one reply.
    ///
    /// - Parameters:
    ///   - kind: The operation's kind as sent.
    ///   - status: The reply's status.
    ///   - replyItem: The reply body's item, if it is one.
    ///   - server: What is known of the server's row (see ``serverRow(status:replyBody:replyItem:)``).
    ///   - sent: The body sent (nil for a delete).
    ///   - resent: Whether an earlier send of the same attempt may have been applied (its reply was lost, or the
    ///     process stopped before reading it). An insert's id is the client's own, so its 409 then means the
    ///     insert landed — another device's insert of the same id is the case this cannot tell apart.
    /// - Returns: The decision.
    static func decide(
        _ kind: OperationKind, status: Int, replyItem: JSONValue?, server: ServerRow, sent: JSONValue?,
        resent: Bool = false
    ) -> PushDecision {
        if isTransientStatus(status) { return .retry }
        if status == 401 { return .unauthorized }
        if (200..<300).contains(status) {
            if kind == .delete { return .succeeded(serverItem: replyItem) }
            return replyItem.map { .succeeded(serverItem: $0) } ?? .retry
        }
        switch (kind, status) {
        case (.delete, 404), (.delete, 410):  // 410: a v3 server's tombstone
            return .succeeded(serverItem: nil)
        case (.update, 404), (.update, 410), (.insert, 409), (.insert, 410), (.update, 409), (.update, 412),
            (.delete, 409), (.delete, 412):
            break
        default:
            return .refused
        }
        let row: JSONValue?
        switch server {
        case .unknown: return .fetchServerItem
        case .absent: row = nil
        case .row(let value): row = value
        }
        guard let row else { return .conflict(serverItem: nil) }
        let converged: Bool
        switch kind {
        // An insert's row may come back with fields the server adds itself (the owner of a per-user
        // table): holding every field sent is the same row.
        case .insert: converged = !row.isDeleted && (resent || holdsEveryField(row, of: sent))
        case .update: converged = status != 404 && status != 410 && !row.isDeleted && holdsEveryField(row, of: sent)
        case .delete: converged = row.isDeleted
        }
        return converged ? .succeeded(serverItem: row) : .conflict(serverItem: row)
    }

    /// What a reply tells of the server's row: a 409/412 body that carries `version` or `updatedAt`
    /// is the server's row; a body without them (a legacy server echoing the request) or a 404 on an
    /// update says nothing, and the row must be fetched.
    ///
    /// - Parameters:
    ///   - status: The reply's status.
    ///   - replyBody: The reply's JSON body.
    ///   - replyItem: The reply's item, with its `ETag` version.
    /// - Returns: What is known.
    static func serverRow(status: Int, replyBody: JSONValue?, replyItem: JSONValue?) -> ServerRow {
        guard status == 409 || status == 412, let replyItem, let body = replyBody,
            body["version"] != nil || body["updatedAt"] != nil
        else { return .unknown }
        return .row(replyItem)
    }

    /// Whether the server's row holds every user field sent, with the same value (null as absent).
    static func holdsEveryField(_ server: JSONValue, of sent: JSONValue?) -> Bool {
        guard let fields = sent?.userFields.objectValue else { return false }
        return fields.allSatisfy { name, value in (server[name] ?? .null) == value }
    }
}
