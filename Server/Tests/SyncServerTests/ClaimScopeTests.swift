import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import SyncSQL
import Testing

@testable import SyncServer

/// Rows scoped by a claim of the token (issue 32, its first part): the access matrix of two tenants over every
/// operation, in and out of scope, in both dialects and a batch, on both stores; a caller without the claim; the
/// settings checked.
@Suite(.timeLimit(.minutes(3))) struct ClaimScopeTests {
    static func withTenants(_ backend: Backend, _ body: @Sendable (any TestClientProtocol) async throws -> Void)
        async throws
    {
        var table = Fixture.table("Ticket")
        table.claimScope = ClaimScope(claim: "tenant", column: "tenantId")
        try await Fixture.withServer(backend, tables: [table], configure: { $0.auth = AuthTests.auth }, body)
    }

    static func token(_ subject: String, tenant: String?) async throws -> HTTPFields {
        AuthTests.bearer(
            try await makeHS256Token(
                subject: subject, secret: AuthTests.secret, audience: AuthTests.audience,
                claims: tenant.map { ["tenant": .string($0)] } ?? [:]))
    }

    @Test(arguments: Backend.all) func eachTenantSeesAndChangesItsOwnRowsOnly(_ backend: Backend) async throws {
        let alice = try await Self.token("alice", tenant: "acme")
        let ann = try await Self.token("ann", tenant: "acme")
        let bob = try await Self.token("bob", tenant: "globex")
        let v3Alice = HTTPFields(Array(alice) + [HTTPField(name: HTTPField.Name("ZUMO-API-VERSION")!, value: "3.0.0")])
        try await Self.withTenants(backend) { (client: any TestClientProtocol) async throws in
            let mine = try await client.send(.post, "/tables/Ticket", json: ["id": "a1", "text": "x"], headers: alice)
            #expect(mine.status == .created && mine.json?["tenantId"] == "acme", "the server sets the column")
            let elsewhere = try await client.send(
                .post, "/tables/Ticket", json: ["id": "a2", "tenantId": "globex"], headers: alice)
            #expect(elsewhere.status == .forbidden, "an insert into another tenant is refused")
            #expect(try await client.send(.post, "/tables/Ticket", json: ["id": "b1"], headers: bob).status == .created)

            // Out of scope: bob's row is as missing for alice, on every path.
            for (method, path, body) in [
                (HTTPRequest.Method.get, "/tables/Ticket/b1", nil),
                (.patch, "/tables/Ticket/b1", ["text": "y"] as JSONValue),
                (.delete, "/tables/Ticket/b1", nil), (.post, "/tables/Ticket/b1", nil),
            ] {
                let reply = try await client.send(method, path, json: body, headers: alice)
                #expect(reply.status == .notFound, "\(method) \(path)")
            }
            for (method, body) in [(HTTPRequest.Method.get, nil), (.put, ["id": "b1"] as JSONValue), (.delete, nil)] {
                let reply = try await client.send(
                    method, "/tables/Ticket/b1", json: body, headers: v3Alice, versioned: false)
                #expect(reply.status == .notFound, "v3 \(method)")
            }
            let taken = try await client.send(.post, "/tables/Ticket", json: ["id": "b1"], headers: alice)
            #expect(taken.status == .conflict && taken.json?["tenantId"] == nil)
            let page = try await client.send(.get, "/tables/Ticket?$inlinecount=allpages", headers: alice)
            #expect(page.ids == ["a1"] && page.json?["count"] == 1)
            #expect(
                try await client.send(.get, "/tables/Ticket?$filter=tenantId%20eq%20'globex'", headers: alice).ids == []
            )
            let batch: JSONValue = [
                "requests": [["method": "PATCH", "url": "tables/Ticket/b1", "body": ["text": "y"]]]
            ]
            let batched = try await client.send(.post, "/batch", json: batch, headers: alice)
            #expect(batched.json?["responses"]?.arrayValue?.first?["status"] == 404)

            // In scope: another member of the tenant reads and changes it; nobody moves it out.
            #expect(try await client.send(.get, "/tables/Ticket/a1", headers: ann).status == .ok)
            let moved = try await client.send(.patch, "/tables/Ticket/a1", json: ["tenantId": "globex"], headers: ann)
            #expect(moved.status == .forbidden && moved.error?.contains("cannot be moved") == true)
            #expect(
                try await client.send(.patch, "/tables/Ticket/a1", json: ["tenantId": .null], headers: ann).status
                    == .forbidden)
            let patched = try await client.send(.patch, "/tables/Ticket/a1", json: ["text": "z"], headers: ann)
            #expect(patched.status == .ok && patched.json?["tenantId"] == "acme")
            let replaced = try await client.send(
                .put, "/tables/Ticket/a1", json: ["id": "a1", "text": "w"], headers: v3Alice, versioned: false)
            #expect(replaced.status == .ok && replaced.json?["tenantId"] == "acme", "a replace keeps the column")
            #expect(try await client.send(.delete, "/tables/Ticket/a1", headers: ann).status == .ok)

            // Bob's row is as bob left it.
            let bobs = try await client.send(.get, "/tables/Ticket/b1", headers: bob)
            #expect(bobs.status == .ok && bobs.json?["text"] == .null && bobs.json?["tenantId"] == "globex")
        }
    }

    @Test func aCallerWithoutTheClaimIsRefused() async throws {
        let nobody = try await Self.token("carol", tenant: nil)
        try await Self.withTenants(.sqlite) { (client: any TestClientProtocol) async throws in
            for (method, path) in [(HTTPRequest.Method.get, "/tables/Ticket"), (.post, "/tables/Ticket")] {
                let reply = try await client.send(method, path, json: method == .post ? [:] : nil, headers: nobody)
                #expect(reply.status == .forbidden && reply.error?.contains("'tenant' claim") == true, "\(method)")
            }
        }
    }

    @Test func claimScopesAreCheckedAtStartup() throws {
        var both = Fixture.table("T")
        both.perUser = true
        both.claimScope = ClaimScope(claim: "tenant", column: "tenantId")
        #expect(throws: ConfigurationError.self) { try both.validate() }
        var typed = Fixture.table("T", columns: ["tenantId": .integer])
        typed.claimScope = ClaimScope(claim: "tenant", column: "tenantId")
        #expect(throws: ConfigurationError.self) { try typed.validate() }
        var noAuth = SyncServerConfiguration()
        var table = Fixture.table("T")
        table.claimScope = ClaimScope(claim: "tenant", column: "tenantId")
        noAuth.tables = [table]
        #expect(throws: ConfigurationError.self) { try noAuth.validate() }
        let file = try ConfigurationFile(
            document: try JSONValue(
                parsing: #"{"tables": [{"name": "T", "claimScope": {"claim": "tenant", "column": "tenantId"}}]}"#))
        #expect(file.tables.first?.claimScope == ClaimScope(claim: "tenant", column: "tenantId"))
    }
}
