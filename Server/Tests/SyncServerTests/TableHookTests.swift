import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// Write hooks (issue 31): each kind refusing with the app's status and message (nothing written), transforming
/// the fields written, and failing safely (500, nothing written) — on both stores, in both dialects and in a batch.
@Suite struct TableHookTests {
    static let v3: HTTPFields = [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"]

    /// Refuses texts that say "forbidden" and items named "keep" from being deleted or undeleted; stamps inserts
    /// and updates with `stamp` and upper-cases their text; `bad` items make the hook change a system property,
    /// `boom` ones make it fail.
    static let hooks: TableHooks = {
        let check: TableHooks.Hook = { write in
            let text = write.fields["text"]?.stringValue
            if text == "forbidden" { throw RequestRefusal(.forbidden, "No forbidden texts (\(write.kind.rawValue))") }
            if text == "bad" { write.fields["updatedAt"] = "2000-01-01T00:00:00.000Z" }
            if text == "boom" { throw CocoaError(.fileNoSuchFile) }
            if let text { write.fields["text"] = .string(text.uppercased()) }
            write.fields["stamp"] = .string(write.kind.rawValue)
        }
        let keep: TableHooks.Hook = { write in
            if write.id.rawValue == "keep" { throw RequestRefusal(.conflict, "'keep' stays (\(write.kind.rawValue))") }
        }
        return TableHooks(beforeInsert: check, beforeUpdate: check, beforeDelete: keep, beforeUndelete: keep)
    }()

    static func withServer(_ backend: Backend, _ body: @Sendable (any TestClientProtocol) async throws -> Void)
        async throws
    {
        try await Fixture.withServer(
            backend, tables: [Fixture.table("TodoItem")],
            configure: { $0.hooks = ["todoitem": Self.hooks] }, body)
    }

    @Test(arguments: Backend.all) func insertAndUpdateHooksTransformAndRefuse(_ backend: Backend) async throws {
        try await Self.withServer(backend) { client in
            // v2 insert and PATCH.
            let inserted = try await client.send(.post, "/tables/TodoItem", json: ["id": "a", "text": "milk"])
            #expect(inserted.status == .created)
            #expect(inserted.json?["text"] == "MILK" && inserted.json?["stamp"] == "insert")
            let patched = try await client.send(.patch, "/tables/TodoItem/a", json: ["text": "eggs"])
            #expect(patched.json?["text"] == "EGGS" && patched.json?["stamp"] == "update")
            let refused = try await client.send(.post, "/tables/TodoItem", json: ["id": "b", "text": "forbidden"])
            #expect(refused.status == .forbidden && refused.error == "No forbidden texts (insert)")
            #expect(try await client.send(.get, "/tables/TodoItem/b").status == .notFound)
            let refusedPatch = try await client.send(.patch, "/tables/TodoItem/a", json: ["text": "forbidden"])
            #expect(refusedPatch.status == .forbidden)

            // v3 insert and PUT, on the same table.
            let v3Insert = try await client.send(
                .post, "/tables/TodoItem", json: ["id": "c", "text": "tea"], headers: Self.v3, versioned: false)
            #expect(v3Insert.status == .created && v3Insert.json?["text"] == "TEA")
            let put = try await client.send(
                .put, "/tables/TodoItem/c", json: ["id": "c", "text": "forbidden"], headers: Self.v3, versioned: false)
            #expect(put.status == .forbidden && put.error == "No forbidden texts (update)")
            let replaced = try await client.send(
                .put, "/tables/TodoItem/c", json: ["id": "c", "text": "coffee"], headers: Self.v3, versioned: false)
            #expect(replaced.json?["text"] == "COFFEE" && replaced.json?["stamp"] == "update")

            // What the refusals left: the rows as the accepted writes made them.
            #expect(try await client.send(.get, "/tables/TodoItem/a").json?["text"] == "EGGS")
            #expect(try await client.send(.get, "/tables/TodoItem/c").json?["text"] == "COFFEE")
        }
    }

    @Test(arguments: Backend.all) func deleteAndUndeleteHooksRefuse(_ backend: Backend) async throws {
        try await Self.withServer(backend) { client in
            for id in ["keep", "go"] {
                #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": .string(id)]).status == .created)
            }
            let refused = try await client.send(.delete, "/tables/TodoItem/keep")
            #expect(refused.status == .conflict && refused.error == "'keep' stays (delete)")
            let v3Refused = try await client.send(.delete, "/tables/TodoItem/keep", headers: Self.v3, versioned: false)
            #expect(v3Refused.status == .conflict)
            #expect(try await client.send(.get, "/tables/TodoItem/keep").status == .ok)
            #expect(try await client.send(.delete, "/tables/TodoItem/go").status == .ok)
            #expect(try await client.send(.post, "/tables/TodoItem/go").status == .ok)  // undelete: not "keep"
        }
        // An undelete of "keep" is refused: the hook sees the id even for a tombstone.
        try await Fixture.withServer(
            backend, tables: [Fixture.table("TodoItem")],
            configure: { $0.hooks = ["TodoItem": TableHooks(beforeUndelete: Self.hooks.beforeDelete)] }
        ) { client in
            #expect(try await client.send(.post, "/tables/TodoItem", json: ["id": "keep"]).status == .created)
            #expect(try await client.send(.delete, "/tables/TodoItem/keep").status == .ok)
            let refused = try await client.send(.post, "/tables/TodoItem/keep")
            #expect(refused.status == .conflict && refused.error == "'keep' stays (undelete)")
            #expect(try await client.send(.get, "/tables/TodoItem/keep").status == .notFound)
        }
    }

    @Test(arguments: Backend.all) func aHookThatFailsOrChangesASystemPropertyWritesNothing(_ backend: Backend)
        async throws
    {
        try await Self.withServer(backend) { client in
            for text in ["bad", "boom"] {
                let reply = try await client.send(
                    .post, "/tables/TodoItem", json: ["id": .string(text), "text": .string(text)])
                #expect(reply.status == .internalServerError)
                #expect(!reply.text.contains("fileNoSuchFile") && !reply.text.contains("updatedAt"))
                #expect(try await client.send(.get, "/tables/TodoItem/\(text)").status == .notFound)
            }
        }
    }

    @Test func hooksRunForTheOperationsOfABatch() async throws {
        try await Self.withServer(.sqlite) { client in
            let batch: JSONValue = [
                "requests": [
                    ["method": "POST", "url": "tables/TodoItem", "body": ["id": "x", "text": "bread"]],
                    ["method": "POST", "url": "tables/TodoItem", "body": ["id": "y", "text": "forbidden"]],
                ]
            ]
            let reply = try await client.send(.post, "/batch", json: batch)
            #expect(reply.status == .ok)
            let answers = reply.json?["responses"]?.arrayValue ?? []
            #expect(answers.map { $0["status"]?.intValue } == [201, 403])
            #expect(try await client.send(.get, "/tables/TodoItem/x").json?["text"] == "BREAD")
        }
    }

    @Test func hooksForATableThatIsNotServedAreRefusedAtStartup() {
        var configuration = SyncServerConfiguration()
        configuration.hooks = ["Nope": TableHooks()]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }
}
