import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncServer
import Testing

/// Transient failures, lost replies and legacy replies during a push or pull (issue 12, points 1,
/// 4, 6 and 7; PROTOCOL.md §5 and §7). Each test failed before the fix it names.
@Suite(.timeLimit(.minutes(3))) struct PushFaultTests {
    static func todo(_ id: String, _ text: String) -> TodoItem { TodoItem(id: id, text: text, complete: false) }

    @Test(.onEveryWire, arguments: [408, 429, 500, 502, 504])
    func everyTransientStatusIsRetriedAndThenSucceeds(status: Int) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.status(status, json: nil)])
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.todo("a", "a"))
            #expect(try await client.push().pushedCount == 1)
            #expect(try await client.operationErrors().isEmpty)
        }
    }

    @Test(.onEveryWire) func aRetryAfterHeaderSetsTheWait() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let clock = ImmediateClock()
            let transport = ScriptedTransport(
                forwardingTo: URLSessionTransport(),
                [.respond(HTTPResponseData(status: 429, headers: ["Retry-After": "7"]))])
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.clock = clock
            }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.todo("a", "a"))
            try await client.push()
            #expect(clock.sleeps == [.seconds(7)])
        }
    }

    /// A success whose body was cut short is not a success: the retry's 409 with the same fields is.
    @Test(.onEveryWire) func aSuccessReplyCutShortIsRetriedAndEndsWithOneServerRow() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            final class CutReply: HTTPTransport, @unchecked Sendable {  // @unchecked: `used` behind `lock`.
                let base = URLSessionTransport()
                let lock = NSLock()
                var used = false
                func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
                    var response = try await base.send(request)
                    if lock.withLock({
                        defer { used = true }; return !used
                    }) {
                        response.body = response.body.prefix(10)
                    }
                    return response
                }
            }
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = CutReply() }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.todo("a", "a"))
            #expect(try await client.push().pushedCount == 1)
            #expect(try await client.table("TodoItem", of: TodoItem.self).items().map(\.id) == ["a"])
            #expect(try await client.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("a"))?.version != nil)
        }
    }

    /// Point 4: the edit collapsed into the pending insert, whose retry then carried other fields and
    /// came back 409 — a conflict against the device's own earlier write.
    @Test(.onEveryWire) func anEditAfterALostInsertReplyIsQueuedSeparatelyAndBothReachTheServer() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.forwardThenFail(.timedOut)])
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.retryLimit = 0
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(Self.todo("a", "first"))
            await #expect(throws: PushError.self) { try await client.push() }
            #expect(try await client.pendingOperations().map(\.isAttempted) == [true])
            // The user edits the item before the next sync; a restart in between changes nothing.
            let restarted = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            let again = try restarted.syncTable("TodoItem", of: TodoItem.self)
            var item = try #require(try await again.item(id: ItemID("a")))
            item.text = "second"
            try await again.update(item)
            #expect(try await restarted.pendingOperations().map(\.kind) == [.insert, .update])
            #expect(try await again.pendingOperations().count == 2)  // the table's own list (it was always empty)
            let result = try await restarted.push()
            #expect(result.pushedCount == 2)
            #expect(try await restarted.operationErrors().isEmpty)
            let server = try await restarted.table("TodoItem", of: TodoItem.self).items()
            #expect(server.map(\.text) == ["second"])
            #expect(try await again.item(id: ItemID("a"))?.version == server.first?.version)
        }
    }

    /// Issue 33 (a file gone with no conflict shown): an update whose reply was lost is retried after another
    /// device set a field this device's row never held, and a newer local edit waits. The retry's 412 is the
    /// server holding every field sent — converged — but the server's row is the other device's, so taking only
    /// its version let the newer edit (a v3 PUT replaces the row) wipe the other device's field unseen.
    @Test(.onEveryWire) func aNewerEditAfterALostUpdateReplyKeepsAFieldAnotherDeviceSetMeanwhile() async throws {
        try await Self.lostUpdateReplyThenAnotherDeviceSetsANote(newerNote: nil) { mine, other, table in
            #expect(try await mine.operationErrors().isEmpty)
            let server = try #require(try await other.table("TodoItem", of: JSONValue.self).item(id: ItemID("t")))
            #expect(server["text"] == "third")
            #expect(server["note"] == "from the other device")
            #expect(try await table.item(id: ItemID("t"))?["note"] == "from the other device")
        }
    }

    /// The same, when the newer edit sets that field too: both changed it, and the newer edit meets the conflict
    /// (it took the other device's version as its own before, and a v2 update then overwrote the value unseen).
    @Test(.onEveryWire) func aNewerEditAfterALostUpdateReplySettingTheFieldAnotherDeviceSetIsAConflict() async throws {
        try await Self.lostUpdateReplyThenAnotherDeviceSetsANote(newerNote: "mine") { mine, other, _ in
            let conflict = try #require(try await mine.operationErrors().first)
            #expect(conflict.isConflict)
            #expect(conflict.serverItem?["note"] == "from the other device")
            #expect(conflict.sentItem?["note"] == "mine")
            let server = try #require(try await other.table("TodoItem", of: JSONValue.self).item(id: ItemID("t")))
            #expect(server["note"] == "from the other device")
        }
    }

    /// A device's update of "t" loses its reply; another device then sets `note`, which the first device's row
    /// never held; a newer local edit (text "third", and `newerNote` when set) waits behind the frozen update;
    /// then the first device pushes and `check` runs.
    static func lostUpdateReplyThenAnotherDeviceSetsANote(
        newerNote: JSONValue?, check: @Sendable (SyncClient, SyncClient, SyncTable<JSONValue>) async throws -> Void
    ) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let (mine, other) = try await SyncClient.pair(
                url, workspace: workspace,
                configureA: {
                    $0.transport = transport
                    $0.retryLimit = 0
                })
            let table = try mine.syncTable("TodoItem")
            try await table.insert(["id": "t", "text": "first"])
            try await mine.push()
            var row = try #require(try await table.item(id: ItemID("t")))
            row["text"] = "second"
            try await table.update(row)
            transport.append([.forwardThenFail(.timedOut)])
            await #expect(throws: PushError.self) { try await mine.push() }
            // Meanwhile the other device sets a field the first device's row has never held.
            let theirs = try other.syncTable("TodoItem")
            try await theirs.pull(queryID: "all")
            var seen = try #require(try await theirs.item(id: ItemID("t")))
            seen["note"] = "from the other device"
            try await theirs.update(seen)
            try await other.push()
            // A newer local edit waits behind the frozen update.
            row = try #require(try await table.item(id: ItemID("t")))
            row["text"] = "third"
            if let newerNote { row["note"] = newerNote }
            try await table.update(row)
            _ = try? await mine.push()
            try await check(mine, other, table)
        }
    }

    /// Issue 47 (sync-chaos --fields, seeds 2 and 5): an insert whose reply was lost lands, another device changes
    /// the item, and the retry meets 409 with a row that no longer holds every field sent. It was shown as a conflict
    /// on an item only this device had made, and keeping mine sent the whole row back over the other device's
    /// change. The insert landed: the server's row is the item, and a newer local edit of another field merges over
    /// it with the insert as its base.
    @Test(.onEveryWire, arguments: [false, true])
    func anInsertWhoseReplyWasLostMeetsAnotherDevicesChangeWithoutAConflict(newerEdit: Bool) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.forwardThenFail(.timedOut)])
            let (mine, other) = try await SyncClient.pair(
                url, workspace: workspace,
                configureA: {
                    $0.transport = transport
                    $0.retryLimit = 0
                })
            let table = try mine.syncTable("TodoItem")
            try await table.insert(["id": "t", "text": "milk", "complete": false])
            await #expect(throws: PushError.self) { try await mine.push() }
            let theirs = try other.syncTable("TodoItem")
            try await theirs.pull(queryID: "all")
            var seen = try #require(try await theirs.item(id: ItemID("t")))
            seen["text"] = "oat milk"
            try await theirs.update(seen)
            try await other.push()
            if newerEdit {
                var row = try #require(try await table.item(id: ItemID("t")))
                row["complete"] = true
                try await table.update(row)
            }
            try await mine.push()
            #expect(try await mine.operationErrors().isEmpty)
            #expect(try await mine.pendingOperations().isEmpty)
            let server = try #require(try await other.table("TodoItem", of: JSONValue.self).item(id: ItemID("t")))
            #expect(server["text"] == "oat milk")
            #expect(server["complete"] == .bool(newerEdit))
            let local = try #require(try await table.item(id: ItemID("t")))
            #expect(local["text"] == "oat milk")
            #expect(local["complete"] == .bool(newerEdit))
            #expect(local.version == server.version)
        }
    }

    /// Point 6: the client always asked `$top=1000`, and every pull failed with 400 after its push.
    @Test func aPullFollowsAServerWithASmallerMaxTopAndRemembersIt() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        let tables = [try TableConfiguration(name: "TodoItem", pageSize: 50, maxTop: 200)]
        try await LiveServer.run(in: workspace, tables: tables) { url in
            try await PullTests.seed(url, workspace, count: 120)
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.transport = transport
                $0.pullsAhead = false  // pages are counted
            }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(Self.todo("mine", "pushed first"))
            let summary = try await table.pull(queryID: "all")
            #expect(summary.appliedCount == 120)
            #expect(try await table.count() == 121)
            let statuses = transport.requests.map { "\($0.method) \($0.url.query?.contains("$top=1000") == true)" }
            #expect(statuses == ["POST false", "GET true", "GET false", "GET false", "GET false"])
            // The next pull asks the remembered page size at once.
            let before = transport.requests.count
            #expect(try await table.pull().appliedCount == 0)
            #expect(transport.requests.dropFirst(before).allSatisfy { $0.url.query?.contains("$top=50") == true })
        }
    }

    /// Point 7: a legacy 409 that echoes the request was taken for the server's row (a lost-reply
    /// success), and the next pull silently overwrote the user's item.
    @Test func aLegacyConflictEchoingTheRequestFetchesTheServersRowBeforeDeciding() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let other = try await SyncClient.make(url, workspace: workspace, store: "other.sqlite")
            _ = try await other.table("TodoItem", of: TodoItem.self).insert(Self.todo("x", "theirs"))
            let echo: JSONValue = ["id": "x", "text": "mine", "complete": false]
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.status(409, json: echo)])
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.todo("x", "mine"))
            let error = await #expect(throws: PushError.self) { try await client.push() }
            let conflict = try #require(error?.result.errors.first)
            #expect(conflict.status == 409)
            #expect(conflict.serverItem?["text"] == "theirs")
            #expect(transport.requests.map(\.method) == ["POST", "GET"])
            #expect(try await client.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("x"))?.text == "mine")
        }
    }

    @Test func aLegacyConflictEchoingARequestTheServerHoldsIsASuccess() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let echo: JSONValue = ["id": "x", "text": "mine", "complete": false]
            // The first attempt's reply is lost; the retry meets a legacy 409 echoing the request.
            let transport = ScriptedTransport(
                forwardingTo: URLSessionTransport(), [.forwardThenFail(.connectionLost), .status(409, json: echo)])
            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.todo("x", "mine"))
            #expect(try await client.push().pushedCount == 1)
            #expect(transport.requests.map(\.method) == ["POST", "POST", "GET"])
            #expect(try await client.syncTable("TodoItem", of: TodoItem.self).item(id: ItemID("x"))?.version != nil)
        }
    }
}

/// A typed model that knows fewer fields than the server's row (an older app version, or a column another app added).
@Suite(.timeLimit(.minutes(3))) struct NarrowModelTests {
    /// `SyncTable.update` stored the encoded model as the whole local row, so a field the model does not know left
    /// the row; v2 sends it as a PATCH (the server kept the field), v3 as a PUT, which replaced the row and dropped
    /// the field on the server (failed on v3 before the fix). The row now keeps the fields the model does not read.
    @Test(.onBothProtocols) func anUpdateThroughANarrowerModelKeepsTheFieldsItDoesNotKnow() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let wide = try await SyncClient.make(url, workspace: workspace, store: "wide.sqlite")
            let narrow = try await SyncClient.make(url, workspace: workspace, store: "narrow.sqlite")
            try await wide.syncTable("TodoItem").insert(["id": "t", "text": "first", "complete": false, "note": "kept"])
            try await wide.push()
            let table = try narrow.syncTable("TodoItem", of: TodoItem.self)
            try await table.pull(queryID: "all")
            var item = try #require(try await table.item(id: ItemID("t")))
            item.text = "second"
            try await table.update(item)
            try await narrow.push()
            let server = try #require(try await wide.table("TodoItem", of: JSONValue.self).item(id: ItemID("t")))
            #expect(server["text"] == "second")
            #expect(server["note"] == "kept")
        }
    }
}
