import Foundation
import OfflineSyncTesting
import Testing

@testable import OfflineSync

/// Defects of the local store found through the public API (issue 12, point 8), with no server: each failed before
/// its fix. (Moved from Server/, whose tests need a server.)
@Suite(.timeLimit(.minutes(3))) struct LocalStoreTests {
    @Test func aRefusedFirstBatchOnANewTableLeavesTheTableUsable() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let table = try client.syncTable("Fresh", of: TodoItem.self)
        let twice = TodoItem(id: "x", text: "x", complete: false)
        await #expect(throws: LocalWriteError.self) { try await table.insert(contentsOf: [twice, twice]) }
        #expect(try await table.items().isEmpty)
        try await table.insert(twice)
        #expect(try await table.items().map(\.id) == ["x"])
    }

    struct Rich: Codable, Sendable, Equatable {
        var id: String
        var link: URL
        var blob: Data
        var price: Decimal
        var tags: [String]
    }

    @Test func modelsWithURLDataAndDecimalFieldsReadBackAsWritten() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let table = try client.syncTable("Rich", of: Rich.self)
        let item = Rich(
            id: "r", link: URL(string: "https://example.com/a?b=c")!, blob: Data([0, 1, 2, 255]),
            price: Decimal(string: "12.75")!, tags: ["a"])
        try await table.insert(item)
        #expect(try await table.item(id: ItemID("r")) == item)
        #expect(try await table.items() == [item])
    }

    struct NumberedItem: Codable, Sendable {
        var id: Int
        var text: String
    }

    @Test func anItemWhoseIDIsNotAStringIsRefusedBeforeAnythingIsWritten() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let table = try client.syncTable("Numbered", of: NumberedItem.self)
        let error = await #expect(throws: ValueError.self) { try await table.insert(NumberedItem(id: 7, text: "x")) }
        // A number says why (a table of integer ids) and what to use instead (issue 50).
        #expect(error?.description.contains("ids are integers") == true)
        #expect(error?.description.contains("SyncClient.table") == true)
        #expect(try await table.count() == 0)
        #expect(try await client.pendingOperations().isEmpty)
    }

    struct Movie: Codable, Sendable, Identifiable {
        var id: Int
        var title: String
    }

    /// Issue 50: an item `Identifiable` by an integer is a table of integer ids, refused as a sync table at once.
    @Test func anItemIdentifiableByAnIntegerIsNoSyncTables() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(URL(string: "http://127.0.0.1:9")!, workspace: workspace)
        let error = #expect(throws: ValueError.self) { try client.syncTable("intIdMovies", of: Movie.self) }
        #expect(error?.description.contains("ids are integers") == true)
        #expect(error?.description.contains("SyncClient.table") == true)
        // Its online table is fine.
        _ = try client.table("intIdMovies", of: Movie.self)
    }
}

@Suite(.timeLimit(.minutes(3))) struct DefaultStoreLocationTests {
    @Test func aNamedStoreLivesInTheApplicationSupportFolder() throws {
        let path = try SQLiteLocalStore.defaultPath(named: "offlinesync-test")
        let support = try FileManager.default.url(
            for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: false)
        #expect(path == support.appendingPathComponent("OfflineSync/offlinesync-test.sqlite").path)
        #expect(FileManager.default.fileExists(atPath: support.appendingPathComponent("OfflineSync").path))
    }

    @Test(arguments: ["", ".hidden", "a/b", "../up", String(repeating: "x", count: 65), "spa ce"])
    func aBadStoreNameIsRefused(name: String) {
        #expect(throws: ValueError.self) { try SQLiteLocalStore.defaultPath(named: name) }
    }
}
