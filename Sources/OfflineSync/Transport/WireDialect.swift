import SyncCore
import SyncOData

/// Everything in which the dialects of the table protocol differ for the client: how its requests are written and
/// how the answers are read. The engine asks the dialect of its endpoint and holds no branch on the protocol; a new
/// dialect is one more conforming type (and a case of ``SyncClient/ProtocolVersion``).
protocol WireDialect: Sendable {
    /// The `ZUMO-API-VERSION` every request carries.
    var version: SyncClient.ProtocolVersion { get }
    /// The query language of `$filter` and `$orderby`.
    var odata: ODataDialect { get }
    /// The query parameter that asks for tombstones too.
    var includeDeletedParameter: String { get }
    /// The method of an update: v2 sends the fields, v3 replaces the item.
    var updateMethod: String { get }
    /// Whether an update sends only the fields that changed (v2's `PATCH`), rather than the whole row (v3's `PUT`).
    var updateSendsChanges: Bool { get }
    /// Whether pushes may go through the batch endpoint (docs/batch.md, which speaks v2).
    var batches: Bool { get }
    /// The member of a page object that holds its rows.
    var pageRows: String { get }
    /// The header field, and its value, that carry a token.
    func authorization(_ token: String) -> (field: String, value: String)
    /// How an item deleted on the server is brought back before its operation is sent again.
    var recreation: Recreation { get }
}

/// The request that brings back an item deleted on the server (an operation that ``PendingOperation`` marks as
/// re-creating it), and what its reply means.
struct Recreation: Sendable {
    /// What the reply decides.
    enum Outcome: Equatable {
        /// Send the operation as this kind, with this precondition.
        case send(OperationKind, Version?)
        /// The reply is the answer of an update that carried the item (decide it as one).
        case answeredAsUpdate
        /// A definitive refusal.
        case refused
    }

    /// `POST` (v2's undelete) or `PUT` (v3's replace, which brings a tombstone back).
    var method: String
    /// Whether the request carries the item (a replace) and asks for tombstones too.
    var carriesItem: Bool
    /// Whether a reply is worth another try.
    var isTransient: @Sendable (_ reply: HTTPResponseData, _ sent: JSONValue?) -> Bool
    /// What a definitive reply means.
    var outcome: @Sendable (HTTPResponseData) -> Outcome
}

/// Azure Mobile Apps 2.0.0.
struct AzureMobileAppsWire: WireDialect {
    var version: SyncClient.ProtocolVersion { .v2 }
    var odata: ODataDialect { .v2 }
    var includeDeletedParameter: String { "__includeDeleted=true" }
    var updateMethod: String { "PATCH" }
    var updateSendsChanges: Bool { true }
    var batches: Bool { true }
    var pageRows: String { "results" }
    func authorization(_ token: String) -> (field: String, value: String) { ("X-ZUMO-AUTH", token) }

    /// Undelete (a no-op on a live item, so a retry is safe); no trace on the server (404): insert.
    var recreation: Recreation {
        Recreation(method: "POST", carriesItem: false, isTransient: { reply, _ in isTransientStatus(reply.status) }) {
            reply in
            if (200..<300).contains(reply.status), let item = reply.item { return .send(.update, item.version) }
            return reply.status == 404 ? .send(.insert, nil) : .refused
        }
    }
}

/// Datasync 3.0.0.
struct DatasyncWire: WireDialect {
    var version: SyncClient.ProtocolVersion { .v3 }
    var odata: ODataDialect { .v3 }
    var includeDeletedParameter: String { "__includedeleted=true" }
    var updateMethod: String { "PUT" }
    var updateSendsChanges: Bool { false }
    var batches: Bool { false }
    var pageRows: String { "items" }
    func authorization(_ token: String) -> (field: String, value: String) { ("Authorization", "Bearer " + token) }

    /// One replace that brings a tombstone back, or overwrites a live row (a retry is safe); no trace on the server
    /// (404): insert.
    var recreation: Recreation {
        Recreation(method: "PUT", carriesItem: true) { reply, sent in
            PushDecision.decide(.update, status: reply.status, replyItem: reply.item, server: .unknown, sent: sent)
                == .retry
        } outcome: { reply in
            reply.status == 404 ? .send(.insert, nil) : .answeredAsUpdate
        }
    }
}

extension SyncClient.ProtocolVersion {
    /// The dialect's wire.
    var wire: any WireDialect {
        switch self {
        case .v2: AzureMobileAppsWire()
        case .v3: DatasyncWire()
        }
    }
}
