import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// docs/server-library.md's first five minutes, as written there: the hooks and the API it configures answer as the
/// page says they do.
@Suite(.timeLimit(.minutes(3))) struct ServerLibraryGuideTests {
    /// The guide's configuration, line for line (but the port and the database).
    static func configure(_ configuration: inout SyncServerConfiguration) throws {
        configuration.tables = [try TableConfiguration(name: "TodoItem")]

        let check: TableHooks.Hook = { write in
            let text = write.fields["text"]?.stringValue?.trimmingCharacters(in: .whitespaces)
            if write.kind == .insert || text != nil {
                guard let text, !text.isEmpty else { throw RequestRefusal(.badRequest, "A to-do needs a text") }
                write.fields["text"] = .string(text)
            }
            write.fields["changedBy"] = write.caller.map { .string($0.subject) } ?? .null
        }
        configuration.hooks["TodoItem"] = TableHooks(beforeInsert: check, beforeUpdate: check)

        struct Terms: Decodable { var a: Int, b: Int }
        configuration.apis = [
            CustomAPI("sum", methods: [.post]) { request in
                let terms = try request.decodeBody(as: Terms.self)
                return APIResponse(body: ["total": .int(Int64(terms.a + terms.b))])
            }
        ]
    }

    @Test func theGuidesExampleAnswersAsThePageSays() async throws {
        var guide = SyncServerConfiguration()
        try Self.configure(&guide)
        try await Fixture.withServer(
            .sqlite, tables: guide.tables,
            configure: {
                $0.hooks = guide.hooks
                $0.apis = guide.apis
            }
        ) { (client: any TestClientProtocol) async throws in
            #expect(try await client.send(.post, "/api/sum", json: ["a": 1, "b": 2]).json == ["total": 3])
            let empty = try await client.send(.post, "/tables/TodoItem", json: ["text": "  "])
            #expect(empty.status == .badRequest && empty.error == "A to-do needs a text")
            let trimmed = try await client.send(.post, "/tables/TodoItem", json: ["id": "t", "text": " milk "])
            #expect(trimmed.json?["text"] == "milk")
            #expect((trimmed.json?["changedBy"] ?? .null) == .null)  // anonymous here: no one to name
            // An update that leaves the text alone passes.
            #expect(try await client.send(.patch, "/tables/TodoItem/t", json: ["complete": true]).status == .ok)
        }
    }
}
