import Foundation
import OfflineSyncTesting
import SyncCore
import Testing

@testable import OfflineSync

/// Queries that run on the local store alone, over rows as a pull stored them (a scripted page: the server is not
/// what is tested), and the date a pull records.
@Suite(.timeLimit(.minutes(3))) struct LocalQueryTests {
    static let backend = URL(string: "http://backend.invalid")!

    /// `count` rows as a server's page holds them, each with its own `updatedAt`, a second apart.
    static func rows(_ count: Int) -> [JSONValue] {
        (0..<count).map { index in
            let updatedAt = WireDate(millisecondsSince1970: 1_800_000_000_000 + Int64(index) * 1000).description
            return [
                "id": .string(String(format: "r%04d", index)), "text": .string("row \(index)"), "complete": false,
                "version": "v1", "updatedAt": .string(updatedAt), "deleted": false,
            ]
        }
    }

    /// A page in the dialect of the test's wire: a v2 array, or v3's `{"items": […]}`.
    static func page(_ rows: [JSONValue]) -> ScriptedTransport.Step {
        .status(200, json: Wire.current.protocol == .v3 ? ["items": .array(rows)] : .array(rows))
    }

    @Test func localQueriesFilterOrderAndPageAnyFieldIncludingUpdatedAt() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(Self.backend, workspace: workspace) {
            $0.transport = ScriptedTransport([Self.page(Self.rows(30))])
        }
        let table = try client.syncTable("TodoItem", of: TodoItem.self)
        try await table.pull(queryID: "all")
        let all = try await table.items(matching: TableQuery().orderBy("updatedAt"))
        #expect(all.count == 30)
        let middle = try #require(all[14].updatedAt)
        let later = try await table.items(
            matching: TableQuery().filter(.field("updatedAt") > middle).orderBy("updatedAt").top(5))
        #expect(later.map(\.id) == all[15..<20].map(\.id))
        let page = try await table.items(matching: TableQuery().orderBy(\.text, .descending).skip(2).top(3))
        #expect(page.map(\.text) == ["row 7", "row 6", "row 5"])
        #expect(try await table.count(matching: TableQuery().filter { $0.text.startsWith("row 1") }) == 11)
    }

    @Test(.onBothProtocols) func aFinishedPullRecordsItsDateAndAFailedOneDoesNot() async throws {
        let workspace = try Workspace()
        let first = Date(timeIntervalSince1970: 1_800_000_000.123)
        let online = try await SyncClient.make(Self.backend, workspace: workspace) {
            $0.transport = ScriptedTransport([Self.page(Self.rows(3))])
            $0.now = { first }
        }
        let table = try online.syncTable("TodoItem", of: TodoItem.self)
        #expect(try await table.lastSyncDate() == nil)
        try await table.pull(queryID: "all")
        #expect(try await table.lastSyncDate() == first)

        let offline = try await SyncClient.make(Self.backend, workspace: workspace) {
            $0.transport = ScriptedTransport([.fail(.unreachable)])
            $0.retryLimit = 0
            $0.now = { first.addingTimeInterval(60) }
        }
        await #expect(throws: PullError.self) { try await offline.syncTable("TodoItem", of: TodoItem.self).pull() }
        #expect(try await offline.syncTable("TodoItem", of: TodoItem.self).lastSyncDate() == first)
    }
}
