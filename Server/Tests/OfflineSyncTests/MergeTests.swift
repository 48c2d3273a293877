import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncSQLite
import SyncServer
import TestSupport
import Testing

/// A to-do item whose due date is optional: synthesized `Codable` leaves a nil one out of the JSON.
struct DatedItem: Codable, Sendable, Equatable {
    var id: String
    var text: String
    var complete: Bool
    var due: String?
}

/// Edits of different fields merge by themselves (issue 47), on every wire and in both sync orders; a field changed
/// on both sides is a conflict that names it and carries base, mine and theirs, or the table's policy decides it;
/// a typed model's nil clears the field on the server.
@Suite(.onEveryWire, .timeLimit(.minutes(3))) struct MergeTests {
    /// Two devices with the item "milk" (due 2026-12-01) on both.
    static func twoDevices(
        _ url: URL, _ workspace: Workspace, configureB: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> (a: SyncClient, b: SyncClient) {
        let (a, b) = try await SyncClient.pair(url, workspace: workspace, configureB: configureB)
        try await a.syncTable("TodoItem", of: DatedItem.self).insert(
            DatedItem(id: "t", text: "milk", complete: false, due: "2026-12-01"))
        try await a.push()
        try await b.syncTable("TodoItem", of: DatedItem.self).pull(queryID: "all")
        return (a, b)
    }

    static func edit(_ client: SyncClient, _ change: (inout DatedItem) -> Void) async throws {
        let table = try client.syncTable("TodoItem", of: DatedItem.self)
        var item = try #require(try await table.item(id: ItemID("t")))
        change(&item)
        try await table.update(item)
    }

    /// ``twoDevices(_:_:configureB:)``, where B's edit of the text ("soy milk") was sent and its reply never read (the
    /// network dropped it): the edit stays queued, attempted, and B sends nothing again by itself (no retries).
    static func devicesWithAnUnreadEdit(_ url: URL, _ workspace: Workspace) async throws -> (
        a: SyncClient, b: SyncClient
    ) {
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        let (a, b) = try await twoDevices(url, workspace) {
            $0.transport = transport
            $0.retryLimit = 0
        }
        try await edit(b) { $0.text = "soy milk" }
        transport.append([.fail(.timedOut)])
        await #expect(throws: PushError.self) { try await b.push() }
        return (a, b)
    }

    static func server(_ client: SyncClient) async throws -> JSONValue? {
        try await client.table("TodoItem", of: JSONValue.self).item(id: ItemID("t"))
    }

    @Test(arguments: [true, false])
    func editsOfDifferentFieldsMergeWhicheverDeviceSyncsFirst(aFirst: Bool) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.twoDevices(url, workspace)
            try await Self.edit(a) { $0.text = "oat milk" }
            try await Self.edit(b) { $0.complete = true }
            var merges: [Int] = []
            for device in aFirst ? [a, b, a] : [b, a, b] {
                merges.append(try await device.push().mergedCount)
                try await device.syncTable("TodoItem", of: DatedItem.self).pull(queryID: "all")
            }
            #expect(merges == [0, 1, 0])
            let expected = DatedItem(id: "t", text: "oat milk", complete: true, due: "2026-12-01")
            for device in [a, b] {
                #expect(try await device.operationErrors().isEmpty)
                #expect(try await device.pendingOperations().isEmpty)
                #expect(try await device.syncTable("TodoItem", of: DatedItem.self).item(id: ItemID("t")) == expected)
            }
            let server = try #require(try await Self.server(a))
            #expect(server["text"] == "oat milk")
            #expect(server["complete"] == true)
        }
    }

    @Test func aFieldChangedOnBothSidesIsAConflictWithBaseMineAndTheirs() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.twoDevices(url, workspace)
            try await Self.edit(a) {
                $0.text = "oat milk"
                $0.due = "2026-12-24"
            }
            try await a.push()
            try await Self.edit(b) {
                $0.text = "soy milk"
                $0.complete = true
            }
            let error = await #expect(throws: PushError.self) { try await b.push() }
            guard case .operationsFailed(let result)? = error else { Issue.record("expected a conflict"); return }
            let conflict = try #require(result.errors.first)
            #expect(conflict.isConflict)
            #expect(conflict.conflictingFields == ["text"])
            #expect(conflict.baseItem?["text"] == "milk")
            #expect(conflict.sentItem?["text"] == "soy milk")
            #expect(conflict.serverItem?["text"] == "oat milk")
            // Parked as before. Keeping mine pushes my changes over the server's row: the due date only the other
            // device changed keeps its value (the whole local row sent it back to 2026-12-01, found by
            // sync-chaos --fields: a done change lost to another device's keep-mine).
            try await b.resolve(conflict, with: .keepMine(nil))
            try await b.push()
            let server = try #require(try await Self.server(a))
            #expect(server["text"] == "soy milk")
            #expect(server["complete"] == true)
            #expect(server["due"] == "2026-12-24")
        }
    }

    /// B marks the item done and pushes with no reply read (`unanswered`: never sent, or applied and its reply lost);
    /// then B's `newer` edit waits behind that update, A changes the text and pushes, and B pushes: no conflict shown,
    /// nothing left waiting. Returns B's item and the server's row after.
    static func doneUnansweredThenNewerEdit(
        _ url: URL, _ workspace: Workspace, unanswered: ScriptedTransport.Step, newer: (inout DatedItem) -> Void
    ) async throws -> (mine: DatedItem?, server: JSONValue?) {
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        let (a, b) = try await Self.twoDevices(url, workspace) {
            $0.transport = transport
            $0.retryLimit = 0
        }
        try await Self.edit(b) { $0.complete = true }
        transport.append([unanswered])
        await #expect(throws: PushError.self) { try await b.push() }
        #expect(try await b.pendingOperations().map(\.isAttempted) == [true])
        try await Self.edit(b, newer)
        try await Self.edit(a) { $0.text = "oat milk" }
        try await a.push()
        try await b.push()
        #expect(try await b.operationErrors().isEmpty)
        #expect(try await b.pendingOperations().isEmpty)
        return (try await b.syncTable("TodoItem", of: DatedItem.self).item(id: ItemID("t")), try await Self.server(a))
    }

    /// A newer edit waits behind an update sent with no reply read; the update's retry meets another device's
    /// change of another field. It was shown as a conflict (the merge left items with a newer edit alone); now the
    /// merge carries both edits (sync-chaos --fields: "a conflict on an item whose field no other device changed").
    @Test func aNewerEditBehindAnUnansweredUpdateMergesToo() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (mine, server) = try await Self.doneUnansweredThenNewerEdit(
                url, workspace, unanswered: .fail(.timedOut)
            ) { $0.due = nil }
            #expect(mine == DatedItem(id: "t", text: "oat milk", complete: true, due: nil))
            #expect(server?["text"] == "oat milk" && server?["complete"] == true && (server?["due"] ?? .null) == .null)
        }
    }

    /// B marks the item done; the update lands but its reply is lost. B reopens it (a newer edit waits behind the
    /// unanswered update), and A changes the text. B's retry meets A's change and merges: the server's `complete`
    /// is B's own lost write, not another device's change — before, the merge took it as the server's and B's reopen
    /// was lost with no conflict shown (sync-chaos --fields: "device 3's acknowledged done change … was lost").
    @Test func aFieldTheServerHoldsAsThisDeviceSentItIsNotAnotherDevicesChange() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (mine, server) = try await Self.doneUnansweredThenNewerEdit(
                url, workspace, unanswered: .forwardThenFail(.timedOut)
            ) { $0.complete = false }
            #expect(mine == DatedItem(id: "t", text: "oat milk", complete: false, due: "2026-12-01"))
            #expect(server?["text"] == "oat milk" && server?["complete"] == false)
        }
    }

    /// sync-chaos --fields under load (seed 13): B's text edit is sent with no reply read (frozen), a newer edit waits
    /// behind it, A changes the text and marks the item done; B's retry meets a conflict on the text and B takes the
    /// server's version. The newer edit's base became the server's row while the local row kept B's stale
    /// `complete = false`, so the newer edit sent it as a change of B's — and A's done was lost with no conflict. Now
    /// the newer edit's own changes go over the server's row; one that meets a change of the server's (the text
    /// again) is a conflict of its own.
    @Test(arguments: [false, true])
    func takingTheServersRowUnderANewerEditKeepsTheServersOtherFields(newerEditsText: Bool) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.devicesWithAnUnreadEdit(url, workspace)
            try await Self.edit(b) { item in
                if newerEditsText { item.text = "rice milk" } else { item.due = "2026-12-24" }
            }
            #expect(try await b.pendingOperations().map(\.isAttempted) == [true, false])
            try await Self.edit(a) {
                $0.text = "oat milk"
                $0.complete = true
            }
            try await a.push()
            await #expect(throws: PushError.self) { try await b.push() }
            let conflict = try #require(try await b.operationErrors().first)
            #expect(conflict.conflictingFields == ["text"])
            try await b.resolve(conflict, with: .takeServerItem)
            if newerEditsText {
                // The newer text meets A's: a conflict of its own, with A's done merged in.
                await #expect(throws: PushError.self) { try await b.push() }
                let again = try #require(try await b.operationErrors().first)
                #expect(again.conflictingFields == ["text"] && again.serverItem?["complete"] == true)
                try await b.resolve(again, with: .keepMine(nil))
            }
            try await b.push()
            let server = try #require(try await Self.server(a))
            let expected = DatedItem(
                id: "t", text: newerEditsText ? "rice milk" : "oat milk", complete: true,
                due: newerEditsText ? "2026-12-01" : "2026-12-24")
            #expect(server["text"] == .string(expected.text) && server["due"] == expected.due.map(JSONValue.string))
            #expect(server["complete"] == true)  // A's done stays
            #expect(try await b.syncTable("TodoItem", of: DatedItem.self).item(id: ItemID("t")) == expected)
        }
    }

    /// Found by `sync-chaos --fields` with change sets: a set's boundary keeps an item's later edits apart, so several
    /// updates of one item can wait behind a conflict. Taken from the server, the settled one's newer edits merged
    /// over the server's row with the last one's base only, and only the last was rebased: the done of the one in
    /// between was lost (its base already said done), and it sent the server's text back as its own change.
    @Test func takingTheServersRowUnderSeveralWaitingEditsKeepsEachOfThem() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.twoDevices(url, workspace) {
                $0.changeSetsWithoutAtomicServer = .sendSeparately
            }
            let table = try b.syncTable("TodoItem", of: DatedItem.self)
            var first = try #require(try await table.item(id: ItemID("t")))
            first.text = "soy milk"
            try await b.changeSet { [first] set in try set.update(first, in: table) }
            try await Self.edit(b) { $0.complete = true }
            var last = try #require(try await table.item(id: ItemID("t")))
            last.due = "2026-12-24"
            try await b.changeSet { [last] set in try set.update(last, in: table) }
            #expect(try await b.pendingOperations().count == 3, "the sets' boundaries keep the three apart")
            try await Self.edit(a) { $0.text = "oat milk" }
            try await a.push()
            await #expect(throws: PushError.self) { try await b.push() }
            let conflict = try #require(try await b.operationErrors().first)
            #expect(conflict.conflictingFields == ["text"])
            try await b.resolve(conflict, with: .takeServerItem)
            let result = try await b.push()
            #expect(result.errors.isEmpty && result.mergedCount == 0)
            let expected = DatedItem(id: "t", text: "oat milk", complete: true, due: "2026-12-24")
            let server = try #require(try await Self.server(a))
            #expect(server["text"] == "oat milk" && server["complete"] == true && server["due"] == "2026-12-24")
            #expect(try await table.item(id: ItemID("t")) == expected)
        }
    }

    /// Found by `sync-chaos --fields` (seed 44, 12 devices, mixed): an update whose retry met a conflict twice in one
    /// push was merged and left to go on the next push, and the push went on to a later edit of the same item (kept
    /// apart by a change set's boundary), out of order and over a stale base: the merged row held another device's text,
    /// the later edit sent it as its own change, and met a conflict naming the text, which B never changes. Now the
    /// item's later edits wait for the next push, after the merged update.
    @Test func anUpdateMergedAndLeftForTheNextPushHoldsBackTheItemsLaterEdits() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let scripted = ScriptedTransport(forwardingTo: URLSessionTransport())
            let transport = Interleaving(scripted)
            let (a, b) = try await Self.twoDevices(url, workspace) {
                $0.transport = transport
                $0.retryLimit = 0
                $0.changeSetsWithoutAtomicServer = .sendSeparately
            }
            try await Self.edit(b) { $0.complete = true }
            scripted.append([.fail(.timedOut)])
            await #expect(throws: PushError.self) { try await b.push() }
            // Three more edits, kept apart by the sets' boundaries; a merge carries the last one waiting.
            let table = try b.syncTable("TodoItem", of: DatedItem.self)
            for change in [{ $0.due = "2026-12-24" }, { $0.complete = false }] as [(inout DatedItem) -> Void] {
                var item = try #require(try await table.item(id: ItemID("t")))
                change(&item)
                try await b.changeSet { [item] set in try set.update(item, in: table) }
            }
            try await Self.edit(b) { $0.due = "2026-12-31" }
            #expect(try await b.pendingOperations().count == 4)
            try await Self.edit(a) { $0.text = "oat milk" }
            try await a.push()
            // A changes the text again just before B's second write (the merged update's retry) and its third.
            for (write, text) in [(2, "rice milk"), (3, "bean milk")] {
                transport.beforeWrite(write) {
                    try await Self.edit(a) { $0.text = text }
                    try await a.push()
                }
            }
            for _ in 0..<3 {
                do { try await b.push() } catch let error as PushError {
                    guard case .operationsFailed(let result) = error else { throw error }
                    Issue.record("B was shown \(result.errors.map(\.conflictingFields)) (B changes no text)")
                    for conflict in result.errors { try await b.resolve(conflict, with: .takeServerItem) }
                }
            }
            #expect(try await b.pendingOperations().isEmpty)
            let server = try #require(try await Self.server(a))
            #expect(server["text"] == "bean milk" && server["complete"] == false && server["due"] == "2026-12-31")
        }
    }

    /// Found by the plain chaos test (seed 1, v2; its monotonic-read check, in 3 of 8 whole-suite runs over two stops):
    /// an edit sent with no reply read, then the item deleted on the device (the delete waits behind the edit), then
    /// the edit's conflict kept as mine. Keeping it wrote the edit's item back into the store: the deleted item showed
    /// again, without the server's stamp, until the next sync deleted it. Now the item stays deleted, and the delete
    /// goes over the server's row the person has seen.
    @Test func keepingMineOfAnEditTheDeviceDeletedSinceDoesNotBringTheItemBack() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.devicesWithAnUnreadEdit(url, workspace)
            let table = try b.syncTable("TodoItem", of: DatedItem.self)
            try await table.delete(id: ItemID("t"))
            #expect(try await b.pendingOperations().map(\.kind) == [.update, .delete])
            try await Self.edit(a) { $0.text = "oat milk" }
            try await a.push()
            await #expect(throws: PushError.self) { try await b.push() }
            let conflict = try #require(try await b.operationErrors().first)
            try await b.resolve(conflict, with: .keepMine(nil))
            #expect(try await table.item(id: ItemID("t")) == nil, "deleted on this device after the edit")
            try await b.push()
            #expect(try await Self.server(a) == nil)
            #expect(try await b.pendingOperations().isEmpty)
            #expect(try await b.operationErrors().isEmpty)
        }
    }

    @Test(arguments: ["serverWins", "clientWins", "resolve"])
    func theTablesPolicyDecidesFieldsChangedOnBothSides(policy: String) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.twoDevices(url, workspace) {
                $0.fieldConflicts["todoitem"] =
                    switch policy {
                    case "serverWins": .serverWins
                    case "clientWins": .clientWins
                    default:
                        .resolve { _, _, mine, theirs in
                            .string("\(theirs.stringValue ?? ""), \(mine.stringValue ?? "")")
                        }
                    }
            }
            try await Self.edit(a) { $0.text = "oat milk" }
            try await a.push()
            try await Self.edit(b) {
                $0.text = "soy milk"
                $0.complete = true
            }
            try await b.push()
            #expect(try await b.operationErrors().isEmpty)
            let server = try #require(try await Self.server(a))
            #expect(server["complete"] == true)  // changed on one side: merged whatever the policy
            let text: JSONValue =
                switch policy {
                case "serverWins": "oat milk"
                case "clientWins": "soy milk"
                default: "oat milk, soy milk"
                }
            #expect(server["text"] == text)
            #expect(try await b.syncTable("TodoItem", of: JSONValue.self).item(id: ItemID("t"))?["text"] == text)
        }
    }

    @Test func aDeleteAgainstAChangeStaysAConflict() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let (a, b) = try await Self.twoDevices(url, workspace)
            try await a.syncTable("TodoItem", of: DatedItem.self).delete(id: ItemID("t"))
            try await a.push()
            try await Self.edit(b) { $0.complete = true }
            await #expect(throws: PushError.self) { try await b.push() }
            #expect(try await b.operationErrors().first?.conflictingFields == [])
        }
    }

    /// Before issue 47 a v2 `PATCH` left the field out, the server kept its date and the next pull brought it back.
    @Test func aTypedModelsNilClearsTheFieldOnTheServer() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            try await Self.clearingADueDate(url, workspace)
        }
    }

    @Test func aTypedModelsNilClearsTheFieldOnAPostgreSQLServer() async throws {
        guard PostgresServer.isRequired else { return }
        try await PostgresServer.withDatabase { database in
            let workspace = try Workspace()
            try await LiveServer.run(in: workspace, configure: { $0.database = .postgres(url: database) }) { url in
                try await Self.clearingADueDate(url, workspace)
            }
        }
    }

    static func clearingADueDate(_ url: URL, _ workspace: Workspace) async throws {
        let (a, b) = try await twoDevices(url, workspace)
        try await edit(a) { $0.due = nil }
        try await a.push()
        #expect(try await server(a)?["due"] == .null)
        try await a.syncTable("TodoItem", of: DatedItem.self).pull(queryID: "all")
        try await b.syncTable("TodoItem", of: DatedItem.self).pull(queryID: "all")
        for device in [a, b] {
            #expect(try await device.syncTable("TodoItem", of: DatedItem.self).item(id: ItemID("t"))?.due == nil)
        }
    }
}

/// Runs another device's work just before one of the client's writes (a request other than GET and HEAD): the n-th
/// from when it was asked for. What it runs lands on the server between two of the client's requests.
final class Interleaving: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind `state`.
    private let inner: any HTTPTransport
    private let state = Locked<(writes: Int, actions: [Int: @Sendable () async throws -> Void])>((0, [:]))

    init(_ inner: any HTTPTransport) { self.inner = inner }

    func beforeWrite(_ count: Int, _ action: @escaping @Sendable () async throws -> Void) {
        state.withLock { $0.actions[$0.writes + count] = action }
    }

    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        if request.method != "GET", request.method != "HEAD" {
            let action = state.withLock { state in
                state.writes += 1
                return state.actions.removeValue(forKey: state.writes)
            }
            try await action?()
        }
        return try await inner.send(request)
    }
}
