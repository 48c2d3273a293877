import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// Changes in the Datasync dialect (PROTOCOL-v3.md §3, §6), on both stores: create (201 with ETag, Last-Modified,
/// Location; 409 with the stored item), PUT replace (absent fields become null; 400, 404, 410, 412), DELETE (204;
/// 410 for a tombstone), undelete by PUT with `__includedeleted=true`, PATCH refused; and a v2 client and a v3
/// client writing one table see each other's writes.
@Suite(.timeLimit(.minutes(3))) struct V3WriteTests {
    static let v3: HTTPFields = [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"]

    func send(
        _ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, json: JSONValue? = nil,
        _ headers: HTTPFields = [:]
    ) async throws -> Reply {
        var all = Self.v3
        for field in headers { all.append(field) }
        return try await client.send(method, uri, json: json, headers: all, versioned: false)
    }

    @Test(arguments: Backend.all) func createReplaceDeleteAndUndelete(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            let created = try await send(
                client, .post, "/tables/TodoItem", json: ["id": "m1", "text": "a", "complete": true])
            #expect(created.status == .created)
            #expect(created.json?["createdAt"] == nil)
            let version = try #require(created.json?["version"]?.stringValue)
            #expect(created["ETag"] == "\"\(version)\"")
            #expect(created["Last-Modified"] != nil)
            #expect(created["Location"]?.hasSuffix("/tables/TodoItem/m1") == true)

            let again = try await send(client, .post, "/tables/TodoItem", json: ["id": "m1", "text": "b"])
            #expect(again.status == .conflict)
            #expect(again.json?["text"] == "a")
            #expect(again.json?["createdAt"] == nil)
            #expect(again["ETag"] == "\"\(version)\"")
            #expect(try await send(client, .post, "/tables/TodoItem", json: ["id": "bad id"]).status == .badRequest)

            // A replace: `complete` left out becomes null; a body version is not a precondition.
            let replaced = try await send(
                client, .put, "/tables/TodoItem/m1", json: ["id": "m1", "text": "replaced", "version": "old"])
            #expect(replaced.status == .ok)
            #expect(replaced.json?["text"] == "replaced")
            #expect(replaced.json?["complete"] == .null)
            #expect(replaced.json?["version"] != created.json?["version"])
            #expect(try await send(client, .put, "/tables/TodoItem/m1", json: ["id": "m2"]).status == .badRequest)
            #expect(try await send(client, .put, "/tables/TodoItem/none", json: ["text": "x"]).status == .notFound)
            let stale = try await send(
                client, .put, "/tables/TodoItem/m1", json: ["text": "x"], [.ifMatch: "\"\(version)\""])
            #expect(stale.status == .preconditionFailed)
            #expect(stale.json?["text"] == "replaced")

            let deleted = try await send(client, .delete, "/tables/TodoItem/m1")
            #expect(deleted.status == .noContent)
            #expect(deleted.text.isEmpty)
            #expect(try await send(client, .delete, "/tables/TodoItem/m1").status == .gone)
            #expect(try await send(client, .delete, "/tables/TodoItem/none").status == .notFound)
            #expect(try await send(client, .put, "/tables/TodoItem/m1", json: ["text": "back"]).status == .gone)
            let back = try await send(client, .put, "/tables/TodoItem/m1?__includedeleted=true", json: ["text": "back"])
            #expect(back.status == .ok)
            #expect(back.json?["deleted"] == false)
            // A PUT with deleted: true is a soft delete, answered with the item.
            let softly = try await send(client, .put, "/tables/TodoItem/m1", json: ["text": "gone", "deleted": true])
            #expect(softly.status == .ok)
            #expect(softly.json?["deleted"] == true)
            #expect(try await send(client, .get, "/tables/TodoItem/m1").status == .gone)

            let patch = try await send(client, .patch, "/tables/TodoItem/m1", json: ["text": "p"])
            #expect(patch.status == .methodNotAllowed)
            #expect(patch["Allow"] == "GET, PUT, DELETE")
            #expect(try await send(client, .post, "/tables/TodoItem/m1").status == .methodNotAllowed)
            #expect(try await send(client, .post, "/batch", json: ["requests": []]).status == .badRequest)
            // PUT is no route of v2's.
            #expect(try await client.send(.put, "/tables/TodoItem/m1", json: ["text": "p"]).status == .methodNotAllowed)
        }
    }

    /// The other conditions on a change (§2): `If-None-Match` naming the version, `If-Unmodified-Since` before
    /// the last change, `If-Modified-Since` not before it — each a 412 with the item, and nothing changed.
    @Test(arguments: Backend.all) func conditionalChanges(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            let created = try await send(client, .post, "/tables/TodoItem", json: ["id": "c1", "text": "a"])
            let tag = try #require(created["ETag"])
            let lastModified = try #require(created["Last-Modified"])
            let past = "Sat, 01 Jan 2000 00:00:00 GMT"
            // An If-Match naming no version of the item (an empty one names none) is a 412 too, not a 400: schemathesis
            // found the empty value refused as malformed, and a list of tags refused even when one of them matched.
            for (name, value) in [
                ("If-None-Match", tag), ("If-None-Match", "*"), ("If-Unmodified-Since", past),
                ("If-Modified-Since", lastModified), ("If-Match", "\"other\", W/\(tag)"), ("If-Match", ""),
            ] {
                let headers: HTTPFields = [HTTPField.Name(name)!: value]
                let put = try await send(client, .put, "/tables/TodoItem/c1", json: ["text": "b"], headers)
                #expect(put.status == .preconditionFailed, "PUT with \(name): \(value)")
                #expect(put.json?["text"] == "a")
                let delete = try await send(client, .delete, "/tables/TodoItem/c1", headers)
                #expect(delete.status == .preconditionFailed, "DELETE with \(name): \(value)")
            }
            // A body no write could store is a 400 before any condition is looked at (schemathesis found a 412).
            let invalid = try await send(
                client, .put, "/tables/TodoItem/c1", json: ["bad name": 1], [.ifMatch: "\"other\""])
            #expect(invalid.status == .badRequest)
            // Conditions that hold let the change through; a list of tags holds when one of them is the version.
            let put = try await send(
                client, .put, "/tables/TodoItem/c1", json: ["text": "b"],
                [.ifNoneMatch: "\"other\"", .ifUnmodifiedSince: lastModified, .ifMatch: "\"other\", \(tag)"])
            #expect(put.status == .ok)
            let newTag = try #require(put["ETag"])
            #expect(
                try await send(
                    client, .delete, "/tables/TodoItem/c1", [.ifModifiedSince: past, .ifMatch: "*, \(newTag)"]
                )
                .status == .noContent)
        }
    }

    /// One table, two dialects: each client reads the other's writes, and v2 keeps createdAt.
    @Test(arguments: Backend.all) func v2AndV3ClientsSeeEachOthersWrites(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            #expect(
                try await client.send(.post, "/tables/TodoItem", json: ["id": "from-v2", "text": "two"]).status
                    == .created)
            #expect(
                try await send(client, .post, "/tables/TodoItem", json: ["id": "from-v3", "text": "three"]).status
                    == .created)
            let v3Page = try await send(client, .get, "/tables/TodoItem?$orderby=id")
            #expect(v3Page.json?["items"]?.arrayValue?.compactMap { $0["text"]?.stringValue } == ["two", "three"])
            let v2Page = try await client.send(.get, "/tables/TodoItem?$orderby=id")
            #expect(v2Page.items.compactMap { $0["text"]?.stringValue } == ["two", "three"])
            #expect(v2Page.items.allSatisfy { $0["createdAt"] != nil })
            // v3 replaces what v2 wrote, v2 patches what v3 wrote, and each precondition is the other's version.
            let v2Row = try #require(v2Page.items.first)
            let v2Version = try #require(v2Row["version"]?.stringValue)
            let replaced = try await send(
                client, .put, "/tables/TodoItem/from-v2", json: ["text": "two, replaced"],
                [.ifMatch: "\"\(v2Version)\""])
            #expect(replaced.status == .ok)
            let v3Version = try #require(v3Page.json?["items"]?.arrayValue?.last?["version"]?.stringValue)
            let patched = try await client.send(
                .patch, "/tables/TodoItem/from-v3", json: ["text": "three, patched"],
                headers: [.ifMatch: "\"\(v3Version)\""])
            #expect(patched.status == .ok)
            #expect(try await client.send(.get, "/tables/TodoItem/from-v2").json?["text"] == "two, replaced")
            #expect(try await send(client, .get, "/tables/TodoItem/from-v3").json?["text"] == "three, patched")
            // A v3 delete is a v2 tombstone.
            #expect(try await send(client, .delete, "/tables/TodoItem/from-v2").status == .noContent)
            #expect(
                try await client.send(.get, "/tables/TodoItem/from-v2?__includeDeleted=true").json?["deleted"] == true)
        }
    }
}
