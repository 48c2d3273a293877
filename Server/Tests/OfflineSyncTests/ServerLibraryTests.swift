import Foundation
import HTTPTypes
import OfflineSync
import SyncServer
import Testing

/// The SDK against a server that an app built on the `SyncServer` library (issue 31): a write hook's refusal is a
/// refused change the app can read and resolve, not a conflict, while the rest of the push goes through; and
/// `invokeAPI` calls the server's custom APIs, typed and untyped, with the server's message on a refusal.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct ServerLibraryTests {
    struct Sum: Codable, Sendable { var a: Int, b: Int }
    struct Total: Codable, Equatable { var total: Int }

    static func configure(_ configuration: inout SyncServerConfiguration) {
        configuration.hooks = [
            "TodoItem": TableHooks(beforeInsert: { write in
                if write.fields["text"]?.stringValue == "spam" { throw RequestRefusal(.badRequest, "No spam") }
            })
        ]
        configuration.apis = [
            CustomAPI("sum", methods: [.post]) { request in
                let sum = try request.decodeBody(as: Sum.self)
                guard sum.a >= 0 else { throw RequestRefusal(.badRequest, "'a' must not be negative") }
                return try APIResponse(encoding: Total(total: sum.a + sum.b))
            },
            CustomAPI("info", methods: [.get]) { request in
                APIResponse(body: ["version": "1", "lang": .string(request.parameters["lang"] ?? "none")])
            },
        ]
    }

    @Test func aHookRefusalIsARefusedChangeAndTheRestIsPushed() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, configure: Self.configure) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            let table = try client.syncTable("TodoItem", of: TodoItem.self)
            try await table.insert(TodoItem(id: "a", text: "milk", complete: false))
            try await table.insert(TodoItem(id: "b", text: "spam", complete: false))
            try await table.insert(TodoItem(id: "c", text: "eggs", complete: false))
            let error = await #expect(throws: PushError.self) { try await client.push() }
            #expect(error?.result.pushedCount == 2)
            let refused = try #require(try await client.operationErrors().first)
            #expect(refused.status == 400 && refused.message == "No spam" && !refused.isConflict)
            // The app fixes the item and tries again.
            try await client.resolve(refused, with: .discard)
            #expect(try await client.pendingOperations().isEmpty)
            let online = try client.table("TodoItem", of: TodoItem.self)
            #expect(try await online.items().map(\.id).sorted() == ["a", "c"])
        }
    }

    @Test func invokeAPICallsTheServersCustomAPIs() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, configure: Self.configure) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            #expect(try await client.invokeAPI("sum", body: Sum(a: 2, b: 3), as: Total.self) == Total(total: 5))
            #expect(
                try await client.invokeAPI("info", method: "GET", parameters: ["lang": "fr & en"])
                    == ["version": "1", "lang": "fr & en"])
            let refused = await #expect(throws: APICallError.self) {
                try await client.invokeAPI("sum", body: Sum(a: -1, b: 0), as: Total.self)
            }
            #expect(refused?.status == 400 && refused?.message == "'a' must not be negative")
            let missing = await #expect(throws: APICallError.self) { try await client.invokeAPI("nothing") }
            #expect(missing?.status == 404)
        }
    }
}
