import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncServer
import TestSupport
import Testing

/// An insert sent again after a lost reply, against a server that removes tombstones (issue 66), in both dialects, one
/// by one and in a batch: when the first send landed and the item was deleted and its tombstone removed since, the
/// resend is a conflict with no server row — never the deleted item made anew — and keeping mine inserts it again;
/// when the device's stamps are past the horizon, the resend is an insert as before.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct RetentionResendTests {
    /// sync-chaos --retention (mixed, seed 1): device 0's insert landed and its reply was lost; device 1 deleted the
    /// item and the server removed the tombstone; device 0's resend found no trace and made the item anew — a delete
    /// acknowledged to device 1 undone, with no conflict shown. The resend carries its floor (`X-Sync-Resend-Floor`),
    /// the server refuses it (410), and the device shows a conflict.
    @Test(arguments: [false, true])
    func anInsertSentAgainAfterItsTombstoneWasRemovedIsAConflict(batched: Bool) async throws {
        try await RetentionSyncTests.withServer { url, workspace, database in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.forwardThenFail(.timedOut)])
            let mine = try await SyncClient.make(url, workspace: workspace, store: "mine.sqlite") {
                $0.transport = transport
                $0.retryLimit = 0
                $0.batchPush = batched ? .always : .never
            }
            let other = try await RetentionSyncTests.device(url, workspace, "other", RetentionSyncTests.Recording())
            try await mine.syncTable("TodoItem").insert(RetentionSyncTests.row("landed"))
            // A batch holds two at least; the second landed too, and is kept.
            if batched { try await mine.syncTable("TodoItem").insert(RetentionSyncTests.row("kept")) }
            await #expect(throws: PushError.self) { try await mine.push() }
            let theirs = try other.syncTable("TodoItem")
            try await theirs.pull(queryID: "all")
            try await theirs.delete(id: ItemID("landed"))
            try await other.push()
            #expect(try await RetentionSyncTests.removeTombstones(database) == 1)

            try? await mine.push()
            let resend = try #require(
                transport.requests.last {
                    $0.method == "POST" && String(decoding: $0.body ?? Data(), as: UTF8.self).contains("landed")
                })
            // As a header of the request, or of the batch's member (a batch of v2's dialect).
            let carried = "\(resend.headers) " + String(decoding: resend.body ?? Data(), as: UTF8.self)
            #expect(carried.contains("X-Sync-Resend-Floor"))
            #expect(resend.url.path.hasSuffix("batch") == (batched && Wire.current.protocol == .v2))
            let refused = try #require(try await mine.operationErrors().first)
            #expect(refused.operation.kind == .insert)
            #expect(refused.status == 410)
            #expect(refused.isConflict)
            #expect(refused.serverItem == nil)
            try await theirs.pull(queryID: "all")
            #expect(try await RetentionSyncTests.ids(other) == (batched ? ["kept"] : []))

            // Keeping mine is the user's word: the item is inserted again.
            try await mine.resolve(refused, with: .keepMine(nil))
            try await mine.push()
            #expect(try await mine.operationErrors().isEmpty)
            try await theirs.pull(queryID: "all")
            #expect(try await RetentionSyncTests.ids(other) == (batched ? ["kept", "landed"] : ["landed"]))
        }
    }

    /// A device whose stamps are past the horizon (it pulled after the removal): its resend cannot meet a tombstone
    /// removed after its first send, and inserts as before — no conflict for an insert that never landed.
    @Test func anInsertSentAgainByADevicePastTheHorizonIsInserted() async throws {
        try await RetentionSyncTests.withServer { url, workspace, database in
            let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
            let mine = try await SyncClient.make(url, workspace: workspace, store: "mine.sqlite") {
                $0.transport = transport
                $0.retryLimit = 0
                $0.batchPush = .never
            }
            let other = try await RetentionSyncTests.device(url, workspace, "other", RetentionSyncTests.Recording())
            try await other.syncTable("TodoItem").insert(RetentionSyncTests.row("old"))
            try await other.push()
            try await other.syncTable("TodoItem").delete(id: ItemID("old"))
            try await other.push()
            #expect(try await RetentionSyncTests.removeTombstones(database) == 1)
            let table = try mine.syncTable("TodoItem")
            try await table.pull(queryID: "all")
            try await table.insert(RetentionSyncTests.row("never-landed"))
            transport.append([.fail(.timedOut)])  // the insert's first send never reaches the server
            await #expect(throws: PushError.self) { try await mine.push() }
            #expect(try await mine.pendingOperations().first?.isAttempted == true)

            try await mine.push()
            #expect(try await mine.operationErrors().isEmpty)
            try await other.syncTable("TodoItem").pull(queryID: "all")
            #expect(try await RetentionSyncTests.ids(other) == ["never-landed"])
        }
    }
}
