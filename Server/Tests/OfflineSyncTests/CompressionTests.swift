import Foundation
import OfflineSync
import OfflineSyncAsyncHTTPClient
import Testing

/// Compressed responses (issue 17, point 3) through both transports, against a real server that compresses
/// (its default): each transport asks for compression, gets it, and hands the SDK the decompressed body.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct CompressionTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case urlSession, asyncHTTPClient
        var transport: any HTTPTransport {
            switch self {
            case .urlSession: URLSessionTransport()
            case .asyncHTTPClient: AsyncHTTPClientTransport()
            }
        }
        var testDescription: String { rawValue }
    }

    /// Rows whose text is one letter repeated compress far more than rows usually do (a page here about 200×):
    /// a transport with a limit on the ratio (AsyncHTTPClient's shared client stops at 25×) would fail the pull
    /// for good. Every row arrives with its text, and a page's reply says it came compressed.
    @Test(arguments: Kind.allCases) func aPageThatCompressesFarArrivesWhole(_ kind: Kind) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let text = String(repeating: "a", count: 4000)
            let seeder = try await SyncClient.make(url, workspace: workspace, store: "seeder.sqlite")
            try await seeder.syncTable("TodoItem", of: TodoItem.self).insert(
                contentsOf: (0..<200).map { TodoItem(id: String(format: "r%04d", $0), text: text, complete: false) })
            try await seeder.push()

            let transport = kind.transport
            let page = try await transport.send(
                HTTPRequestData(
                    method: "GET",
                    url: url.appending(path: "tables/TodoItem").appending(queryItems: [
                        .init(name: "$top", value: "50")
                    ]),
                    headers: ["ZUMO-API-VERSION": "2.0.0"]))
            #expect(page.status == 200)
            #expect(["gzip", "deflate"].contains(page.header("Content-Encoding") ?? ""), "\(page.headers)")
            let rows = try JSONSerialization.jsonObject(with: page.body) as? [[String: Any]]
            #expect(rows?.count == 50)  // the table's page size

            let client = try await SyncClient.make(url, workspace: workspace) { $0.transport = transport }
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            #expect(try await table.pull(queryID: "all").appliedCount == 200)
            let stored = try await table.items()
            #expect(stored.count == 200)
            #expect(stored.allSatisfy { $0.text == text })
        }
    }
}
