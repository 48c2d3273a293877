import Foundation
import GRDB
import OfflineSync
import SyncCore
import Testing

@testable import OfflineSync

/// What the store does with queue rows it cannot read as they are: it says so, and never guesses.
@Suite(.timeLimit(.minutes(3))) struct StoreDefectTests {
    /// An operation of a kind this version does not know (a newer SDK wrote it, the app went back a version) was read
    /// as an update and pushed as one; it stops the reads of the queue with an error that names it.
    @Test func anOperationOfAnUnknownKindIsRefusedNotSentAsAnUpdate() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        try await client.syncTable("TodoItem", of: TodoItem.self).insert(TodoItem(id: "a", text: "a", complete: false))
        let database = try DatabaseQueue(path: workspace.path("client.sqlite"))
        try await database.write { try $0.execute(sql: "UPDATE sync_operations SET kind = 'undelete'") }
        try database.close()

        let error = await #expect(throws: LocalStoreError.self) { try await client.pendingOperations() }
        #expect(error?.localizedDescription.contains("is 'undelete', not insert, update or delete") == true)
        await #expect(throws: LocalStoreError.self) { try await client.push() }
    }

    /// Saving an operation that left the queue meanwhile (another client pushed or purged it) changes nothing and
    /// does not fail the transaction it is in.
    @Test func savingAnOperationThatLeftTheQueueIsANoOp() async throws {
        let workspace = try Workspace()
        let store = try SQLiteLocalStore(path: workspace.path("store.sqlite"))
        let gone = PendingOperation(id: 42, table: try TableName("TodoItem"), itemID: try ItemID("a"), kind: .update)
        try await store.write { writer in try writer.updateOperation(gone) }
        #expect(try await store.read { try $0.operationCount(in: nil) } == 0)
    }
}
