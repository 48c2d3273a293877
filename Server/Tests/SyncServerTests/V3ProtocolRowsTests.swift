import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// The rows of PROTOCOL-v3.md's tables that V3ReadTests and V3WriteTests leave out, on both stores: trailing-slash
/// routes (§1), which versions select the dialect (§2), unquoted `If-Match` (§2, ours), 415 (§3), `$top` over
/// `maxTop` and `__includeDeleted` in any case (§4), a table without soft delete (§6), and under auth 401 and a
/// per-user table's rows (§3: ours answers 409 with an error body where the toolkit answers 400).
@Suite(.timeLimit(.minutes(3))) struct V3ProtocolRowsTests {
    static func v3(_ version: String = "3.0.0", _ more: HTTPFields = [:]) -> HTTPFields {
        var fields: HTTPFields = [HTTPField.Name("ZUMO-API-VERSION")!: version]
        for field in more { fields.append(field) }
        return fields
    }

    @Test(arguments: Backend.all) func routesVersionsMediaTypesAndQueryLimits(_ backend: Backend) async throws {
        let tables = [Fixture.table("TodoItem", maxTop: 100), Fixture.table("Log", softDelete: false)]
        try await Fixture.withServer(backend, tables: tables) { client in
            // §1: the online toolkit client appends a slash to the table's URL.
            let created = try await client.send(
                .post, "/tables/TodoItem/", json: ["id": "s1", "text": "a"], headers: Self.v3(), versioned: false)
            #expect(created.status == .created)
            let page = try await client.send(
                .get, "/tables/TodoItem/?$top=0&$count=true", headers: Self.v3(), versioned: false)
            #expect(page.json == ["items": [], "count": 1, "nextLink": .null])

            // §2: 3.0.x selects v3 (header or query parameter); v6's "3.0" and others are refused.
            for version in ["3.0.0", "3.0.1", "3.0.10"] {
                let reply = try await client.send(
                    .get, "/tables/TodoItem/s1", headers: Self.v3(version), versioned: false)
                #expect(reply.json?["createdAt"] == nil && reply.status == .ok, "\(version)")
            }
            for version in ["3.0", "3", "3.1.0", "9.0.0", "true", "3.0.x"] {
                let reply = try await client.send(
                    .get, "/tables/TodoItem/s1", headers: Self.v3(version), versioned: false)
                #expect(reply.status == .badRequest, "\(version)")
            }
            let byQuery = try await client.send(.get, "/tables/TodoItem/s1?zumo-api-version=3.0.0", versioned: false)
            #expect(byQuery.status == .ok && byQuery.json?["createdAt"] == nil)

            // §2 [ours]: an unquoted If-Match is read as the tag it names (the toolkit drops it and checks nothing).
            let version = try #require(created.json?["version"]?.stringValue)
            let unquotedStale = try await client.send(
                .put, "/tables/TodoItem/s1", json: ["text": "b"], headers: Self.v3("3.0.0", [.ifMatch: "old"]),
                versioned: false)
            #expect(unquotedStale.status == .preconditionFailed)
            let unquoted = try await client.send(
                .put, "/tables/TodoItem/s1", json: ["text": "b"], headers: Self.v3("3.0.0", [.ifMatch: version]),
                versioned: false)
            #expect(unquoted.status == .ok)

            // §3: a body that is not JSON is a 415, on create and on replace.
            for (method, path) in [(HTTPRequest.Method.post, "/tables/TodoItem"), (.put, "/tables/TodoItem/s1")] {
                let refused = try await client.send(
                    method, path, body: #"{"text":"x"}"#, headers: Self.v3("3.0.0", [.contentType: "text/plain"]),
                    versioned: false)
                #expect(refused.status == .unsupportedMediaType, "\(method) \(path)")
            }

            // §4: $top over the table's maxTop is a 400; __includedeleted is read in any case.
            let over = try await client.send(.get, "/tables/TodoItem?$top=101", headers: Self.v3(), versioned: false)
            #expect(over.status == .badRequest)
            _ = try await client.send(.delete, "/tables/TodoItem/s1", headers: Self.v3(), versioned: false)
            for name in ["__includedeleted", "__includeDeleted", "__INCLUDEDELETED"] {
                let reply = try await client.send(
                    .get, "/tables/TodoItem/s1?\(name)=TRUE", headers: Self.v3(), versioned: false)
                #expect(reply.status == .ok && reply.json?["deleted"] == true, "\(name)")
            }

            // §6: in a table without soft delete, DELETE removes the row: then 404, not 410.
            _ = try await client.send(.post, "/tables/Log", json: ["id": "l1"], headers: Self.v3(), versioned: false)
            #expect(
                try await client.send(.delete, "/tables/Log/l1", headers: Self.v3(), versioned: false).status
                    == .noContent)
            for method in [HTTPRequest.Method.get, .delete] {
                let reply = try await client.send(method, "/tables/Log/l1", headers: Self.v3(), versioned: false)
                #expect(reply.status == .notFound, "\(method)")
            }
        }
    }

    @Test(arguments: Backend.all) func tokensAndAPerUserTable(_ backend: Backend) async throws {
        try await AuthTests.withServer(backend) { client in
            let alice = Self.v3("3.0.0", AuthTests.bearer(try await AuthTests.token("alice")))
            let bob = Self.v3("3.0.0", AuthTests.bearer(try await AuthTests.token("bob")))
            // 401 with a challenge without a token, as in v2.
            let anonymous = try await client.send(.get, "/tables/TodoItem", headers: Self.v3(), versioned: false)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous["WWW-Authenticate"]?.hasPrefix("Bearer") == true)

            let created = try await client.send(
                .post, "/tables/TodoItem", json: ["id": "a1", "text": "alice's"], headers: alice, versioned: false)
            #expect(created.status == .created)
            // Another user's row is not there for bob: 404 to read, replace and delete; a create of its id is a 409
            // with an error body, not her item [ours; the toolkit answers 400].
            for method in [HTTPRequest.Method.get, .put, .delete] {
                let reply = try await client.send(
                    method, "/tables/TodoItem/a1", json: method == .put ? ["text": "bob's"] : nil, headers: bob,
                    versioned: false)
                #expect(reply.status == .notFound, "\(method)")
            }
            let taken = try await client.send(
                .post, "/tables/TodoItem", json: ["id": "a1", "text": "bob's"], headers: bob, versioned: false)
            #expect(taken.status == .conflict)
            #expect(taken.json?["text"] == nil && taken.error != nil)
            let page = try await client.send(.get, "/tables/TodoItem?$count=true", headers: bob, versioned: false)
            #expect(page.json?["count"] == 0)
            // Her replace keeps her as the owner.
            let replaced = try await client.send(
                .put, "/tables/TodoItem/a1", json: ["text": "still alice's"], headers: alice, versioned: false)
            #expect(replaced.status == .ok && replaced.json?["userId"] == "alice")
        }
    }
}
