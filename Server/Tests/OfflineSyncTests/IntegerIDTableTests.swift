import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncSQL
import SyncServer
import Testing

/// Issue 50: a table of integer ids the server gives (``TableConfiguration/integerIDs``) through the SDK — the online
/// table API reads, inserts, updates and deletes its items as the E2E suites do; offline sync refuses it clearly at the
/// pull for untyped items (an item `Identifiable` by an integer is refused at `syncTable`: `LocalStoreTests`).
@Suite(.timeLimit(.minutes(3))) struct IntegerIDTableTests {
    /// An item of an integer-id table: `id` 0 until the server gives one.
    struct Movie: Codable, Sendable, Hashable, Identifiable {
        var id: Int = 0
        var title: String
        var version: String?
    }

    static var movies: TableConfiguration {
        get throws {
            var table = try TableConfiguration(name: "intIdMovies", columns: ["title": .string])
            table.integerIDs = true
            return table
        }
    }

    @Test func theOnlineTableReadsInsertsUpdatesAndDeletesByNumber() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: [try Self.movies]) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            let table = try client.table("intIdMovies", of: Movie.self)
            let first = try await table.insert(Movie(title: "Hey"))
            let second = try await table.insert(Movie(title: "Ho"))
            #expect(first.id > 0 && second.id == first.id + 1)
            #expect(try await table.item(id: ItemID(String(first.id)))?.title == "Hey")
            #expect(try await table.item(id: ItemID("0")) == nil)

            var changed = first
            changed.title = "What?"
            let updated = try await table.update(changed)
            #expect(updated.id == first.id && updated.title == "What?" && updated.version != first.version)
            // The version is the precondition: the first copy is stale now.
            await #expect(throws: RemoteTableError.self) { try await table.update(first) }

            let above = try await table.items(matching: TableQuery<Movie>().filter { $0.id > first.id })
            #expect(above.map(\.id) == [second.id])
            try await table.delete(updated)
            #expect(try await table.items().map(\.id) == [second.id])
        }
    }

    /// Before, a pull of such a table failed with "a row has no valid id", which says nothing of what to do; an
    /// untyped sync table cannot be refused before it meets the rows.
    @Test func aPullOfIntegerIdsSaysWhatToUseInstead() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: [try Self.movies]) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            _ = try await client.table("intIdMovies", of: Movie.self).insert(Movie(title: "Hey"))
            let untyped = try client.syncTable("intIdMovies")
            await #expect {
                try await untyped.pull(queryID: "all")
            } throws: { error in
                "\(error)".contains("ids are integers") && "\(error)".contains("SyncClient.table")
            }
            #expect(try await untyped.items().isEmpty)
            // A local insert of an item with a number for its id says the same.
            await #expect {
                try await untyped.insert(["id": 5, "title": "x"])
            } throws: { error in
                "\(error)".contains("ids are integers")
            }
        }
    }
}
