import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import SyncSQL
import Testing

@testable import SyncServer

/// Rows shared through a members table (issue 32): the access matrix — each role (owner, editor, viewer, not a
/// member) × each operation (read, page, insert, change, move, delete, undelete; the members' own) × a row in and out
/// of the caller's groups — in both dialects and a batch, on both stores; creating a group; leaving one; the scope
/// token a page carries; the settings checked.
@Suite(.timeLimit(.minutes(3))) struct MembershipScopeTests {
    /// The sample's tables: lists (each its own group), their items, and who belongs to which list.
    static var tables: [TableConfiguration] {
        var members = Fixture.table("ListMember", columns: ["listId": .string, "userId": .string, "role": .string])
        members.members = MembersTable(groupColumn: "listId", userColumn: "userId", roleColumn: "role")
        var lists = Fixture.table("TodoList", columns: ["name": .string])
        lists.membershipScope = MembershipScope(column: "id", members: members.name)
        var items = Fixture.table("TodoItem")
        items.membershipScope = MembershipScope(column: "listId", members: members.name)
        return [members, lists, items]
    }

    static func withLists(_ backend: Backend, _ body: @Sendable (any TestClientProtocol) async throws -> Void)
        async throws
    {
        try await Fixture.withServer(backend, tables: tables, configure: { $0.auth = AuthTests.auth }, body)
    }

    static func token(_ subject: String) async throws -> HTTPFields {
        AuthTests.bearer(
            try await makeHS256Token(subject: subject, secret: AuthTests.secret, audience: AuthTests.audience))
    }

    static func v3(_ headers: HTTPFields) -> HTTPFields {
        HTTPFields(Array(headers) + [HTTPField(name: HTTPField.Name("ZUMO-API-VERSION")!, value: "3.0.0")])
    }

    /// alice owns L1 (eddie edits it, vera views it), bob owns L2; each list has one item.
    static func share(_ client: any TestClientProtocol) async throws {
        let alice = try await token("alice")
        let bob = try await token("bob")
        for (id, list, user, role, by) in [
            ("m1", "L1", "alice", "owner", alice), ("m2", "L1", "eddie", "editor", alice),
            ("m3", "L1", "vera", "viewer", alice), ("m4", "L2", "bob", "owner", bob),
        ] {
            let member: JSONValue = [
                "id": .string(id), "listId": .string(list), "userId": .string(user), "role": .string(role),
            ]
            let reply = try await client.send(.post, "/tables/ListMember", json: member, headers: by)
            #expect(reply.status == .created, "\(id): \(reply.text)")
        }
        for (list, item, by) in [("L1", "i1", alice), ("L2", "b1", bob)] {
            #expect(
                try await client.send(.post, "/tables/TodoList", json: ["id": .string(list)], headers: by).status
                    == .created)
            let reply = try await client.send(
                .post, "/tables/TodoItem", json: ["id": .string(item), "listId": .string(list)], headers: by)
            #expect(reply.status == .created, "\(item): \(reply.text)")
        }
    }

    @Test(arguments: Backend.all) func eachRoleReadsAndWritesWhatItMay(_ backend: Backend) async throws {
        let (alice, eddie, vera, bob) = (
            try await Self.token("alice"), try await Self.token("eddie"), try await Self.token("vera"),
            try await Self.token("bob")
        )
        try await Self.withLists(backend) { (client: any TestClientProtocol) async throws in
            try await Self.share(client)
            typealias Cell = (HTTPFields, HTTPRequest.Method, String, JSONValue?, HTTPResponse.Status)
            let matrix: [(String, Cell)] = [
                // Reads: every member; the row of a group the caller is not in is as missing.
                ("owner reads", (alice, .get, "/tables/TodoItem/i1", nil, .ok)),
                ("editor reads", (eddie, .get, "/tables/TodoItem/i1", nil, .ok)),
                ("viewer reads", (vera, .get, "/tables/TodoItem/i1", nil, .ok)),
                ("outsider reads", (bob, .get, "/tables/TodoItem/i1", nil, .notFound)),
                ("outsider reads the list", (bob, .get, "/tables/TodoList/L1", nil, .notFound)),
                // Inserts: owners and editors, into their groups; a row has a group.
                ("owner inserts", (alice, .post, "/tables/TodoItem", ["id": "i2", "listId": "L1"], .created)),
                ("editor inserts", (eddie, .post, "/tables/TodoItem", ["id": "i3", "listId": "L1"], .created)),
                ("viewer inserts", (vera, .post, "/tables/TodoItem", ["id": "i4", "listId": "L1"], .forbidden)),
                ("outsider inserts", (bob, .post, "/tables/TodoItem", ["id": "i5", "listId": "L1"], .forbidden)),
                ("insert without a group", (alice, .post, "/tables/TodoItem", ["id": "i6"], .badRequest)),
                ("insert into null", (alice, .post, "/tables/TodoItem", ["id": "i7", "listId": .null], .badRequest)),
                ("id taken out of scope", (bob, .post, "/tables/TodoItem", ["id": "i1", "listId": "L2"], .conflict)),
                // Changes: owners and editors; a viewer is refused, an outsider finds nothing.
                ("owner changes", (alice, .patch, "/tables/TodoItem/i1", ["text": "a"], .ok)),
                ("editor changes", (eddie, .patch, "/tables/TodoItem/i1", ["text": "e"], .ok)),
                ("viewer changes", (vera, .patch, "/tables/TodoItem/i1", ["text": "v"], .forbidden)),
                ("outsider changes", (bob, .patch, "/tables/TodoItem/i1", ["text": "b"], .notFound)),
                // A whole row sent back names its own group: no move, the same answers.
                ("outsider sends the row", (bob, .patch, "/tables/TodoItem/i1", ["listId": "L1"], .notFound)),
                ("viewer sends the row", (vera, .patch, "/tables/TodoItem/i1", ["listId": "L1"], .forbidden)),
                ("editor sends the row", (eddie, .patch, "/tables/TodoItem/i1", ["listId": "L1"], .ok)),
                // Moves: only to a group the caller writes too.
                ("editor moves out", (eddie, .patch, "/tables/TodoItem/i1", ["listId": "L2"], .forbidden)),
                ("owner moves to null", (alice, .patch, "/tables/TodoItem/i1", ["listId": .null], .badRequest)),
                ("outsider moves in", (bob, .patch, "/tables/TodoItem/b1", ["listId": "L1"], .forbidden)),
                // Deletes and undeletes.
                ("viewer deletes", (vera, .delete, "/tables/TodoItem/i1", nil, .forbidden)),
                ("outsider deletes", (bob, .delete, "/tables/TodoItem/i1", nil, .notFound)),
                ("editor deletes", (eddie, .delete, "/tables/TodoItem/i2", nil, .ok)),
                ("viewer undeletes", (vera, .post, "/tables/TodoItem/i2", nil, .forbidden)),
                ("outsider undeletes", (bob, .post, "/tables/TodoItem/i2", nil, .notFound)),
                ("owner undeletes", (alice, .post, "/tables/TodoItem/i2", nil, .ok)),
                // The Datasync dialect.
                ("v3 viewer replaces", (Self.v3(vera), .put, "/tables/TodoItem/i1", ["id": "i1"], .forbidden)),
                ("v3 outsider reads", (Self.v3(bob), .get, "/tables/TodoItem/i1", nil, .notFound)),
                ("v3 outsider deletes", (Self.v3(bob), .delete, "/tables/TodoItem/i1", nil, .notFound)),
                ("v3 viewer deletes", (Self.v3(vera), .delete, "/tables/TodoItem/i1", nil, .forbidden)),
                ("v3 editor replaces", (Self.v3(eddie), .put, "/tables/TodoItem/i1", ["id": "i1", "text": "r"], .ok)),
                // The members: read by the group's members, changed by its owners; anyone may leave.
                ("viewer reads a member", (vera, .get, "/tables/ListMember/m1", nil, .ok)),
                ("outsider reads a member", (bob, .get, "/tables/ListMember/m1", nil, .notFound)),
                ("viewer promotes herself", (vera, .patch, "/tables/ListMember/m3", ["role": "owner"], .forbidden)),
                (
                    "editor adds a member",
                    (
                        eddie, .post, "/tables/ListMember", ["listId": "L1", "userId": "zed", "role": "viewer"],
                        .forbidden
                    )
                ),
                (
                    "outsider joins",
                    (bob, .post, "/tables/ListMember", ["listId": "L1", "userId": "bob", "role": "owner"], .forbidden)
                ),
                ("owner sets a bad role", (alice, .patch, "/tables/ListMember/m3", ["role": "admin"], .badRequest)),
                ("owner changes a role", (alice, .patch, "/tables/ListMember/m2", ["role": "viewer"], .ok)),
                ("outsider removes the owner", (bob, .delete, "/tables/ListMember/m1", nil, .notFound)),
                ("viewer removes the owner", (vera, .delete, "/tables/ListMember/m1", nil, .forbidden)),
                ("viewer leaves", (vera, .delete, "/tables/ListMember/m3", nil, .ok)),
                ("who left reads", (vera, .get, "/tables/TodoItem/i1", nil, .notFound)),
                ("who became a viewer changes", (eddie, .patch, "/tables/TodoItem/i1", ["text": "x"], .forbidden)),
            ]
            for (name, (headers, method, path, body, expected)) in matrix {
                let reply = try await client.send(
                    method, path, json: body, headers: headers, versioned: !headers.contains { $0.value == "3.0.0" })
                #expect(reply.status == expected, "\(name): \(method) \(path) → \(reply.status) \(reply.text)")
            }

            // Pages hold the caller's groups' rows only, whatever the filter asks.
            #expect(try await client.send(.get, "/tables/TodoItem", headers: alice).ids.sorted() == ["i1", "i2", "i3"])
            #expect(try await client.send(.get, "/tables/TodoItem?$filter=listId%20eq%20'L1'", headers: bob).ids == [])
            #expect(try await client.send(.get, "/tables/TodoList", headers: bob).ids == ["L2"])
            #expect(
                try await client.send(.get, "/tables/ListMember", headers: eddie).ids.sorted() == ["m1", "m2"],
                "the members of eddie's lists (vera left)")
            #expect(
                try await client.send(.get, "/tables/ListMember?__includeDeleted=true", headers: vera).ids == ["m3"],
                "who left still reads their own row: its tombstone tells their devices")
            let batch: JSONValue = [
                "requests": [["method": "PATCH", "url": "tables/TodoItem/i1", "body": ["text": "b"]]]
            ]
            let batched = try await client.send(.post, "/batch", json: batch, headers: bob)
            #expect(batched.json?["responses"]?.arrayValue?.first?["status"] == 404)
            let unchanged = try await client.send(.get, "/tables/TodoItem/i1", headers: alice)
            #expect(unchanged.json?["text"] == "r" && unchanged.json?["listId"] == "L1")
        }
    }

    @Test(arguments: Backend.all) func aPageCarriesTheCallersScopeToken(_ backend: Backend) async throws {
        let (alice, bob) = (try await Self.token("alice"), try await Self.token("bob"))
        try await Self.withLists(backend) { (client: any TestClientProtocol) async throws in
            try await Self.share(client)
            let header = TableConfiguration.scopeHeader
            let first = try await client.send(.get, "/tables/TodoItem", headers: alice)[header]
            #expect(first != nil)
            #expect(try await client.send(.get, "/tables/TodoList", headers: alice)[header] == first, "per caller")
            #expect(try await client.send(.get, "/tables/TodoItem", headers: bob)[header] != first)
            // A write in the group leaves it; joining another group changes it; leaving it again brings it back.
            _ = try await client.send(.post, "/tables/TodoItem", json: ["listId": "L1"], headers: alice)
            #expect(try await client.send(.get, "/tables/TodoItem", headers: alice)[header] == first)
            let join: JSONValue = ["id": "m9", "listId": "L2", "userId": "alice", "role": "viewer"]
            #expect(try await client.send(.post, "/tables/ListMember", json: join, headers: bob).status == .created)
            let joined = try await client.send(.get, "/tables/TodoItem", headers: alice)
            #expect(joined[header] != first && joined.ids.contains("b1"))
            #expect(try await client.send(.delete, "/tables/ListMember/m9", headers: bob).status == .ok)
            #expect(try await client.send(.get, "/tables/TodoItem", headers: alice)[header] == first)

            // A row moved out of a group changes its members' token after the `.` (their groups are the same), the
            // token of the group it went to not at all; the database records the move whatever wrote it.
            let eddie = try await Self.token("eddie")
            let before = try #require(try await client.send(.get, "/tables/TodoItem", headers: eddie)[header])
            let bobsBefore = try await client.send(.get, "/tables/TodoItem", headers: bob)[header]
            let editor: JSONValue = ["id": "m10", "listId": "L2", "userId": "alice", "role": "editor"]
            #expect(try await client.send(.post, "/tables/ListMember", json: editor, headers: bob).status == .created)
            let moved = try await client.send(.patch, "/tables/TodoItem/i1", json: ["listId": "L2"], headers: alice)
            #expect(moved.status == .ok && moved.json?["listId"] == "L2")
            let after = try #require(try await client.send(.get, "/tables/TodoItem", headers: eddie)[header])
            #expect(after != before && after.split(separator: ".").first == before.split(separator: ".").first)
            #expect(try await client.send(.get, "/tables/TodoItem", headers: bob)[header] == bobsBefore)
            #expect(try await client.send(.get, "/tables/TodoItem/i1", headers: eddie).status == .notFound)
        }
    }

    @Test func membershipScopesAreCheckedAtStartup() throws {
        var undeclared = Fixture.table("M")
        undeclared.members = MembersTable(groupColumn: "g", userColumn: "u", roleColumn: "r")
        #expect(throws: ConfigurationError.self) { try undeclared.validate() }
        var both = Fixture.table("T")
        both.perUser = true
        both.membershipScope = MembershipScope(column: "listId", members: TableName(rawValue: "M")!)
        #expect(throws: ConfigurationError.self) { try both.validate() }
        var orphan = SyncServerConfiguration()
        orphan.auth = AuthTests.auth
        orphan.tables = [Self.tables[2]]
        #expect(throws: ConfigurationError.self) { try orphan.validate() }
        var served = SyncServerConfiguration()
        served.auth = AuthTests.auth
        served.tables = Self.tables
        try served.validate()
        let file = try ConfigurationFile(
            document: try JSONValue(
                parsing: #"""
                    {"tables": [
                      {"name": "ListMember", "columns": {"listId": "string", "userId": "string", "role": "string"},
                       "members": {"group": "listId", "user": "userId", "role": "role"}},
                      {"name": "TodoItem", "membershipScope": {"column": "listId", "members": "ListMember"}}]}
                    """#))
        #expect(
            file.tables.first?.members == MembersTable(groupColumn: "listId", userColumn: "userId", roleColumn: "role"))
        #expect(file.tables.last?.membershipScope?.column == "listId")
    }
}
