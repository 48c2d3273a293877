import OfflineSync
import Testing

@testable import OfflineSync

/// The table of ``PushDecision/decide(_:status:replyItem:server:sent:)``, cell by cell.
@Suite(.timeLimit(.minutes(3))) struct PushDecisionTests {
    static let sent: JSONValue = ["id": "a", "text": "mine"]
    static let live: JSONValue = ["id": "a", "text": "mine", "version": "v2", "updatedAt": "2026-01-01T00:00:00.000Z"]
    static let other: JSONValue = [
        "id": "a", "text": "theirs", "version": "v2", "updatedAt": "2026-01-01T00:00:00.000Z",
    ]
    static let tombstone: JSONValue = ["id": "a", "text": "mine", "version": "v3", "deleted": true]

    @Test(arguments: [OperationKind.insert, .update, .delete])
    func transientStatusesAreRetriedAnd401Stops(kind: OperationKind) {
        for status in [408, 429, 500, 502, 503, 504, 599] {
            #expect(
                PushDecision.decide(kind, status: status, replyItem: nil, server: .unknown, sent: Self.sent) == .retry)
        }
        #expect(PushDecision.decide(kind, status: 401, replyItem: nil, server: .unknown, sent: nil) == .unauthorized)
    }

    @Test func successesNeedTheServersItemExceptForDeletes() {
        #expect(
            PushDecision.decide(.insert, status: 201, replyItem: Self.live, server: .unknown, sent: Self.sent)
                == .succeeded(serverItem: Self.live))
        #expect(PushDecision.decide(.update, status: 200, replyItem: nil, server: .unknown, sent: Self.sent) == .retry)
        #expect(
            PushDecision.decide(.delete, status: 200, replyItem: nil, server: .unknown, sent: nil)
                == .succeeded(serverItem: nil))
        // 404, and a v3 server's 410 for a tombstone: already gone. 204 is v3's answer, with no body.
        for status in [404, 410, 204] {
            #expect(
                PushDecision.decide(.delete, status: status, replyItem: nil, server: .unknown, sent: nil)
                    == .succeeded(serverItem: nil))
        }
    }

    @Test(arguments: [
        (OperationKind.insert, 409), (.update, 409), (.update, 412), (.update, 404), (.update, 410), (.delete, 409),
        (.delete, 412),
    ])
    func conflictsWithoutTheServersRowFetchIt(kind: OperationKind, status: Int) {
        #expect(
            PushDecision.decide(kind, status: status, replyItem: nil, server: .unknown, sent: Self.sent)
                == .fetchServerItem)
        #expect(
            PushDecision.decide(kind, status: status, replyItem: nil, server: .absent, sent: Self.sent)
                == .conflict(serverItem: nil))
    }

    @Test func aConflictWhoseServerRowAlreadyHoldsTheChangeIsASuccess() {
        // insert and update: every field sent; delete: already deleted.
        #expect(
            PushDecision.decide(.insert, status: 409, replyItem: nil, server: .row(Self.live), sent: Self.sent)
                == .succeeded(serverItem: Self.live))
        // A field the server adds itself (a per-user table's owner) does not make a retried insert a conflict:
        // sync-chaos --per-user found it (a lost reply to an insert, then "a conflict no other device wrote").
        var owned = Self.live
        owned["userId"] = "alice"
        #expect(
            PushDecision.decide(.insert, status: 409, replyItem: nil, server: .row(owned), sent: Self.sent)
                == .succeeded(serverItem: owned))
        #expect(
            PushDecision.decide(.update, status: 412, replyItem: nil, server: .row(Self.live), sent: Self.sent)
                == .succeeded(serverItem: Self.live))
        #expect(
            PushDecision.decide(.delete, status: 412, replyItem: nil, server: .row(Self.tombstone), sent: nil)
                == .succeeded(serverItem: Self.tombstone))
        // …and one that does not is a conflict with it.
        #expect(
            PushDecision.decide(.insert, status: 409, replyItem: nil, server: .row(Self.other), sent: Self.sent)
                == .conflict(serverItem: Self.other))
        #expect(
            PushDecision.decide(.update, status: 412, replyItem: nil, server: .row(Self.other), sent: Self.sent)
                == .conflict(serverItem: Self.other))
        #expect(
            PushDecision.decide(.insert, status: 409, replyItem: nil, server: .row(Self.tombstone), sent: Self.sent)
                == .conflict(serverItem: Self.tombstone))
        // An insert sent before whose reply was not read landed: another device's later change is the item
        // (issue 47). Deleted since, it stays a conflict.
        #expect(
            PushDecision.decide(
                .insert, status: 409, replyItem: nil, server: .row(Self.other), sent: Self.sent, resent: true)
                == .succeeded(serverItem: Self.other))
        #expect(
            PushDecision.decide(
                .insert, status: 409, replyItem: nil, server: .row(Self.tombstone), sent: Self.sent, resent: true)
                == .conflict(serverItem: Self.tombstone))
        #expect(
            PushDecision.decide(
                .update, status: 412, replyItem: nil, server: .row(Self.other), sent: Self.sent, resent: true)
                == .conflict(serverItem: Self.other))
        for status in [404, 410] {  // 410: a v3 server's tombstone, even when it holds every field sent
            #expect(
                PushDecision.decide(
                    .update, status: status, replyItem: nil, server: .row(Self.tombstone), sent: Self.sent)
                    == .conflict(serverItem: Self.tombstone))
        }
        #expect(
            PushDecision.decide(.delete, status: 412, replyItem: nil, server: .row(Self.other), sent: nil)
                == .conflict(serverItem: Self.other))
    }

    @Test(arguments: [400, 403, 404, 405, 413, 422, 302])
    func otherStatusesAreRefusals(status: Int) {
        #expect(
            PushDecision.decide(.insert, status: status, replyItem: nil, server: .unknown, sent: Self.sent) == .refused)
    }

    /// An insert sent again after a lost reply, refused 410 (the server may have removed its tombstone): the server's
    /// row decides — none is a conflict with no server item; a live row is the insert that landed; a tombstone is a
    /// conflict.
    @Test func aResentInsertAnswered410IsDecidedByTheServersRow() {
        let decide = { (server: PushDecision.ServerRow) in
            PushDecision.decide(.insert, status: 410, replyItem: nil, server: server, sent: Self.sent, resent: true)
        }
        #expect(decide(.unknown) == .fetchServerItem)
        #expect(decide(.absent) == .conflict(serverItem: nil))
        #expect(decide(.row(Self.other)) == .succeeded(serverItem: Self.other))
        #expect(decide(.row(Self.tombstone)) == .conflict(serverItem: Self.tombstone))
    }

    @Test func aConflictBodyIsTheServersRowOnlyWithItsSystemProperties() {
        let echo: JSONValue = ["id": "a", "text": "mine"]
        #expect(PushDecision.serverRow(status: 409, replyBody: echo, replyItem: echo) == .unknown)
        #expect(PushDecision.serverRow(status: 409, replyBody: Self.live, replyItem: Self.live) == .row(Self.live))
        #expect(PushDecision.serverRow(status: 404, replyBody: nil, replyItem: nil) == .unknown)
    }
}
