import Foundation
import OfflineSync
import Testing

@Suite struct LocalQueryTests {
    @Test func localQueriesFilterOrderAndPageAnyFieldIncludingUpdatedAt() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            try await PullTests.seed(url, workspace, count: 30)
            let client = try await SyncClient.make(url, workspace: workspace)
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
    }
}
