import SyncCore
import Testing

@testable import OfflineSync

/// The three-way merge, cell by cell (HandlingConflicts.md's table): each of a field's local × server cases, absent
/// as null, system properties as the server's, every policy for a field changed on both sides, and what a v2 update
/// sends (the changes since the base, a cleared field as null).
@Suite(.timeLimit(.minutes(3))) struct FieldMergeTests {
    static let base: JSONValue = ["id": "a", "text": "milk", "complete": false, "due": "2026-12-01", "version": "v1"]

    @Test(
        arguments: [
            // mine, theirs, merged, conflicts — each a change of `text` against the base's "milk"
            ("milk", "milk", "milk", [String]()),  // neither changed
            ("oat milk", "milk", "oat milk", []),  // mine only
            ("milk", "oat milk", "oat milk", []),  // theirs only
            ("oat milk", "oat milk", "oat milk", []),  // both, to the same value
            ("soy milk", "oat milk", "oat milk", ["text"]),  // both, differently: a conflict (theirs until decided)
        ] as [(String, String, String, [String])])
    func eachCellOfAField(mine: String, theirs: String, merged: String, conflicts: [String]) {
        var local = Self.base
        local["text"] = .string(mine)
        var server = Self.base
        server["text"] = .string(theirs)
        server["version"] = "v2"
        let outcome = FieldMerge.merge(base: Self.base, mine: local, theirs: server)
        #expect(outcome.merged["text"] == .string(merged))
        #expect(outcome.conflicts == conflicts)
        #expect(outcome.merged["version"] == "v2")  // the server's system properties
    }

    /// Text compares by its bytes (issue 63): another device's rewrite of a field in another normalization is a
    /// change, merged as any other; and a field of a million combining marks in the other order costs a linear
    /// comparison, not a quadratic one (`sync-bench --only input.cost.compare`).
    @Test func aFieldRewrittenInAnotherNormalizationIsAChange() {
        var base = Self.base
        base["text"] = "cafe\u{301}"
        var theirs = base
        theirs["text"] = "caf\u{E9}"
        theirs["version"] = "v2"
        let outcome = FieldMerge.merge(base: base, mine: base, theirs: theirs)
        #expect(outcome.merged["text"] == "caf\u{E9}")
        #expect(outcome.conflicts.isEmpty)
        var mine = base
        mine["text"] = "cafe\u{301}!"
        #expect(FieldMerge.merge(base: base, mine: mine, theirs: theirs).conflicts == ["text"])
    }

    @Test func differentFieldsMergeAndAClearedFieldIsAChange() {
        var mine = Self.base
        mine["complete"] = true
        mine["due"] = nil  // a typed model's nil: the key is absent
        var theirs = Self.base
        theirs["text"] = "oat milk"
        theirs["note"] = "from B"  // a field the base did not have
        theirs["version"] = "v2"
        let outcome = FieldMerge.merge(base: Self.base, mine: mine, theirs: theirs)
        #expect(outcome.conflicts.isEmpty)
        #expect(
            outcome.merged == [
                "id": "a", "text": "oat milk", "complete": true, "due": .null, "note": "from B", "version": "v2",
            ])
        // Cleared on one side, changed on the other: a conflict.
        var changed = Self.base
        changed["due"] = "2026-12-24"
        #expect(FieldMerge.merge(base: Self.base, mine: mine, theirs: changed).conflicts == ["due"])
    }

    @Test func eachPolicyDecidesTheFieldsChangedOnBothSides() {
        var mine = Self.base
        (mine["text"], mine["complete"]) = ("soy milk", true)
        var theirs = Self.base
        (theirs["text"], theirs["version"]) = ("oat milk", "v2")
        #expect(FieldMerge.merge(base: Self.base, mine: mine, theirs: theirs, policy: .surface) == nil)
        let server = FieldMerge.merge(base: Self.base, mine: mine, theirs: theirs, policy: .serverWins)
        #expect(server?["text"] == "oat milk")
        #expect(server?["complete"] == true)  // not in conflict: mine
        let client = FieldMerge.merge(base: Self.base, mine: mine, theirs: theirs, policy: .clientWins)
        #expect(client?["text"] == "soy milk")
        #expect(client?["version"] == "v2")
        let joined = FieldMerge.merge(
            base: Self.base, mine: mine, theirs: theirs,
            policy: .resolve { field, base, mine, theirs in
                .string("\(field): \(base.stringValue ?? "") → \(mine.stringValue ?? "") + \(theirs.stringValue ?? "")")
            })
        #expect(joined?["text"] == "text: milk → soy milk + oat milk")
        // Nothing in conflict: no policy is asked.
        var other = Self.base
        other["text"] = "oat milk"
        #expect(
            FieldMerge.merge(
                base: Self.base, mine: ["id": "a", "text": "milk", "complete": true, "due": "2026-12-01"],
                theirs: other, policy: .surface)?["complete"] == true)
    }

    @Test func aV2UpdateSendsTheChangesSinceTheBaseWithNullForACleared() throws {
        var row = Self.base
        row["complete"] = true
        row["due"] = nil
        row["version"] = "v1"
        #expect(FieldMerge.patch(row, since: Self.base) == ["id": "a", "complete": true, "due": .null])
        #expect(FieldMerge.patch(Self.base, since: Self.base) == ["id": "a"])
        // The body is derived from the frozen row and the base: the same bytes on every retry; with no base, or
        // under v3, the row.
        let update = PendingOperation(
            id: 1, table: try TableName("TodoItem"), itemID: try ItemID("a"), kind: .update,
            attempt: .init(item: row.removing(SystemProperty.serverManaged), version: Version("v1")), base: Self.base)
        #expect(PushRunner.body(of: update, sendsChanges: true) == ["id": "a", "complete": true, "due": .null])
        #expect(PushRunner.body(of: update, sendsChanges: false) == update.attempt?.item)
        var imported = update
        imported.base = nil
        #expect(PushRunner.body(of: imported, sendsChanges: true) == update.attempt?.item)
    }

    /// After a send that may have been applied: a field the server holds as it was sent is this device's change, so
    /// a newer local edit of it (here back to the base's value) wins; a field the server changed otherwise stays the
    /// server's, and a field sent unchanged stays as the base.
    @Test func aFieldTheServerHoldsAsSentIsMineNotTheServers() {
        let sent: JSONValue = ["id": "a", "text": "milk", "complete": true, "due": "2026-12-01"]
        let theirs: JSONValue = ["id": "a", "text": "oat milk", "complete": true, "due": "2026-12-01", "version": "v3"]
        let mine: JSONValue = ["id": "a", "text": "milk", "complete": false, "due": "2026-12-01"]
        let rebased = FieldMerge.base(Self.base, sent: sent, theirs: theirs)
        #expect(rebased["complete"] == true)
        #expect(rebased["text"] == "milk")
        let merged = FieldMerge.merge(base: rebased, mine: mine, theirs: theirs)
        #expect(merged.conflicts.isEmpty)
        #expect(merged.merged["complete"] == false)
        #expect(merged.merged["text"] == "oat milk")
        // Without the send's knowledge, the server's `complete` (this device's own) undid the newer edit.
        #expect(FieldMerge.merge(base: Self.base, mine: mine, theirs: theirs).merged["complete"] == true)
        #expect(FieldMerge.base(Self.base, sent: nil, theirs: theirs) == Self.base)
    }
}
