import Foundation
import Testing

@testable import OfflineSync

/// Every error the SDK throws reads as its one-line description through `localizedDescription` too
/// (an app shows `error.localizedDescription`), never Foundation's "The operation could not be completed".
@Suite(.timeLimit(.minutes(3))) struct ErrorDescriptionTests {
    static let operation = PendingOperation(
        id: 3, table: TableName(rawValue: "TodoItem")!, itemID: ItemID(rawValue: "a1")!, kind: .update)

    static let errors: [any Error] = [
        LocalWriteError(.deleted, table: operation.table, itemID: operation.itemID, pendingOperation: operation),
        LocalStoreError(operation: "write", underlying: CancellationError()),
        PushError.serverUnavailable(
            ServerUnavailableError(.status(503), attempts: 4), PushResult(pushedCount: 2)),
        PullError.unauthorized,
        ServerUnavailableError(.noReply(TransportError(.connectionLost, host: "example.com:443")), attempts: 1),
        PurgeError(table: operation.table, pendingCount: 2),
        ResolutionError.operationGone(operation),
        TransportError(.timedOut, host: "example.com:443"),
        OperationError(operation: operation, status: 412, message: nil, sentItem: nil, serverItem: nil),
        ValueError(kind: "item id", reason: "it is empty"),
    ]

    @Test(arguments: 0..<errors.count)
    func localizedDescriptionIsTheOneLineDescription(index: Int) {
        let error = Self.errors[index]
        #expect(error.localizedDescription == String(describing: error))
        #expect(!error.localizedDescription.contains("could not be completed"))
        #expect(!error.localizedDescription.contains("\n"))
    }
}

@Suite(.timeLimit(.minutes(3))) struct TableNameTests {
    @Test(arguments: ["", "9lives", "todo item", "todo/item", String(repeating: "a", count: 129)])
    func anInvalidTableNameThrowsInsteadOfCrashing(name: String) async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        #expect(throws: ValueError.self) { try client.syncTable(name, of: TodoItem.self) }
        #expect(throws: ValueError.self) { try client.table(name, of: TodoItem.self) }
    }
}
