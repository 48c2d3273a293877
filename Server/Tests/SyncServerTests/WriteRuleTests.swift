import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import SyncCore
import SyncSQL
import Testing

@testable import SyncServer

/// Every rule holds on every route (issue 44, items 5–8): each access rule (signed-in, restricted to another user,
/// disabled) × each write effect (insert, change, delete, undelete) × every route that performs it (v2, v3 — a
/// replace with `deleted` included — and `/batch`), on both stores; the delete hook on a replace that deletes;
/// a members row replaced without its role; a group claimed by several callers at once, and one whose members left.
@Suite(.timeLimit(.minutes(3))) struct WriteRuleTests {
    static let v3: HTTPFields = [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"]

    /// A route that performs an effect on the row `id`: the request, and whether it goes through `/batch`.
    struct Route: Sendable {
        let name: String
        let method: HTTPRequest.Method
        let path: @Sendable (String) -> String
        var body: @Sendable (String) -> JSONValue?
        var isV3 = false
        var isBatched = false
    }

    /// The routes of each effect; the row must exist (for an undelete, as a tombstone) unless inserting.
    static let routes: [(WriteEffect, [Route])] = [
        (
            .insert,
            [
                Route(name: "v2 POST", method: .post, path: { _ in "/tables/notes" }, body: { ["id": .string($0)] }),
                Route(
                    name: "v3 POST", method: .post, path: { _ in "/tables/notes" }, body: { ["id": .string($0)] },
                    isV3: true),
                Route(
                    name: "batch POST", method: .post, path: { _ in "tables/notes" }, body: { ["id": .string($0)] },
                    isBatched: true),
            ]
        ),
        (
            .change,
            [
                Route(name: "v2 PATCH", method: .patch, path: { "/tables/notes/\($0)" }, body: { _ in ["text": "c"] }),
                Route(
                    name: "v3 PUT", method: .put, path: { "/tables/notes/\($0)" },
                    body: { ["id": .string($0), "text": "c"] }, isV3: true),
                Route(
                    name: "batch PATCH", method: .patch, path: { "tables/notes/\($0)" }, body: { _ in ["text": "c"] },
                    isBatched: true),
            ]
        ),
        (
            .delete,
            [
                Route(name: "v2 DELETE", method: .delete, path: { "/tables/notes/\($0)" }, body: { _ in nil }),
                Route(
                    name: "v3 DELETE", method: .delete, path: { "/tables/notes/\($0)" }, body: { _ in nil }, isV3: true),
                Route(
                    name: "v3 PUT deleted", method: .put, path: { "/tables/notes/\($0)" },
                    body: { ["id": .string($0), "deleted": true] }, isV3: true),
                Route(
                    name: "batch DELETE", method: .delete, path: { "tables/notes/\($0)" }, body: { _ in nil },
                    isBatched: true),
            ]
        ),
        (
            .undelete,
            [
                Route(name: "v2 POST item", method: .post, path: { "/tables/notes/\($0)" }, body: { _ in nil }),
                Route(
                    name: "v3 PUT restore", method: .put, path: { "/tables/notes/\($0)?__includedeleted=true" },
                    body: { ["id": .string($0), "deleted": false] }, isV3: true),
                Route(
                    name: "batch POST item", method: .post, path: { "tables/notes/\($0)" }, body: { _ in nil },
                    isBatched: true),
            ]
        ),
    ]

    /// The status `route` got for row `id` (a batch's: its one operation's).
    static func perform(
        _ route: Route, _ id: String, _ client: any TestClientProtocol, as caller: HTTPFields
    ) async throws -> Int {
        if route.isBatched {
            var operation: [String: JSONValue] = [
                "method": .string(route.method.rawValue), "url": .string(route.path(id)),
            ]
            if let body = route.body(id) { operation["body"] = body }
            let reply = try await client.send(
                .post, "/batch", json: ["requests": [.object(operation)]], headers: caller)
            return Int(reply.json?["responses"]?.arrayValue?.first?["status"]?.intValue ?? Int64(reply.status.code))
        }
        let headers = route.isV3 ? HTTPFields(Array(caller) + Array(Self.v3)) : caller
        let reply = try await client.send(
            route.method, route.path(id), json: route.body(id), headers: headers, versioned: !route.isV3)
        return reply.status.code
    }

    @Test(arguments: Backend.all) func everyAccessRuleHoldsOnEveryRouteOfItsEffect(_ backend: Backend) async throws {
        let alice = AuthTests.bearer(try await AuthTests.token("alice"))
        let rules: [(Access, Int?)] = [
            (.authenticated, nil), (.restricted(subjects: ["zed"], roles: []), 403), (.disabled, 405),
        ]
        for (effect, routes) in Self.routes {
            for (rule, refusal) in rules {
                var notes = Fixture.table("notes")
                notes.access = [effect.operation: rule]
                try await Fixture.withServer(backend, tables: [notes], configure: { $0.auth = AuthTests.auth }) {
                    client in
                    for (index, route) in routes.enumerated() {
                        let id = "r\(index)"
                        // The row as the effect needs it, written through routes the rule under test does not govern.
                        if effect != .insert {
                            let stored = try await client.send(
                                .post, "/tables/notes", json: ["id": .string(id)], headers: alice)
                            #expect(stored.status == .created)
                        }
                        if effect == .undelete {
                            _ = try await client.send(.delete, "/tables/notes/\(id)", headers: alice)
                        }
                        let before = try await client.send(
                            .get, "/tables/notes/\(id)?__includeDeleted=true", headers: alice)
                        let status = try await Self.perform(route, id, client, as: alice)
                        let cell = "\(effect) by \(route.name) under \(rule)"
                        if let refusal {
                            #expect(status == refusal, "\(cell): \(status)")
                            let after = try await client.send(
                                .get, "/tables/notes/\(id)?__includeDeleted=true", headers: alice)
                            #expect(after.text == before.text, "\(cell): the refused write changed nothing")
                        } else {
                            #expect((200..<300).contains(status), "\(cell): \(status)")
                        }
                    }
                }
            }
        }
    }

    /// One write pipeline (issue 46): every route of an effect runs that effect's hook — which refuses alike on each
    /// (its status, and its message where the route answers one) and whose rewrite of the fields is what each stores —
    /// and the same validation (a field of a type no column takes: 400). The console and a custom API's
    /// `APIRequest.tables` only read, so no write reaches the store but through these routes.
    @Test(arguments: Backend.all) func everyRouteOfAnEffectRunsItsHookAndItsValidation(_ backend: Backend) async throws
    {
        for (effect, routes) in Self.routes {
            // Refuses rows whose id starts with "no" for this effect only; stamps the text of the others.
            let hook: TableHooks.Hook = { write in
                guard write.kind == effect.hook else { return }
                if write.id.rawValue.hasPrefix("no") { throw RequestRefusal(.conflict, "no \(write.kind.rawValue)") }
                if write.kind == .insert || write.kind == .update {
                    write.fields["text"] = .string("by \(write.kind.rawValue)")
                }
            }
            let hooks = TableHooks(beforeInsert: hook, beforeUpdate: hook, beforeDelete: hook, beforeUndelete: hook)
            try await Fixture.withServer(
                backend, tables: [Fixture.table("notes", columns: ["text": .string])],
                configure: { $0.hooks = ["notes": hooks] }
            ) { client in
                for (index, route) in routes.enumerated() {
                    for id in ["no\(index)", "ok\(index)"] {
                        if effect != .insert {
                            #expect(
                                try await client.send(.post, "/tables/notes", json: ["id": .string(id)]).status
                                    == .created)
                        }
                        if effect == .undelete { _ = try await client.send(.delete, "/tables/notes/\(id)") }
                    }
                    let cell = "\(effect) by \(route.name)"
                    #expect(try await Self.perform(route, "no\(index)", client, as: [:]) == 409, "\(cell): refused")
                    if !route.isBatched {
                        let reply = try await client.send(
                            route.method, route.path("no\(index)"), json: route.body("no\(index)"),
                            headers: route.isV3 ? Self.v3 : [:], versioned: !route.isV3)
                        #expect(reply.error == "no \(effect.hook.rawValue)", "\(cell): \(reply.text)")
                    }
                    let status = try await Self.perform(route, "ok\(index)", client, as: [:])
                    #expect((200..<300).contains(status), "\(cell): \(status)")
                    if effect == .insert || effect == .change {
                        let stored = try await client.send(.get, "/tables/notes/ok\(index)")
                        #expect(
                            stored.json?["text"]?.stringValue == "by \(effect.hook.rawValue)", "\(cell): \(stored.text)"
                        )
                    }
                }
            }
        }
        // The same validation on every route of an insert or a change.
        try await Fixture.withServer(backend, tables: [Fixture.table("notes", columns: ["text": .string])]) { client in
            for (effect, routes) in Self.routes where effect == .insert || effect == .change {
                for (index, route) in routes.enumerated() {
                    let id = "bad-\(effect)-\(index)"
                    if effect == .change {
                        _ = try await client.send(.post, "/tables/notes", json: ["id": .string(id)])
                    }
                    var invalid = route
                    invalid.body = { id in
                        var body = route.body(id)?.objectValue ?? [:]
                        body["text"] = ["not": "a string"]
                        return .object(body)
                    }
                    let status = try await Self.perform(invalid, id, client, as: [:])
                    #expect(status == 400, "\(effect) by \(route.name): \(status)")
                }
            }
        }
    }

    @Test(arguments: Backend.all) func aReplaceThatDeletesOrRestoresRunsThoseHooks(_ backend: Backend) async throws {
        let keep: TableHooks.Hook = { write in
            if write.id.rawValue == "keep" { throw RequestRefusal(.conflict, "'keep' stays (\(write.kind.rawValue))") }
        }
        let hooks = TableHooks(beforeDelete: keep, beforeUndelete: keep)
        try await Fixture.withServer(
            backend, tables: [Fixture.table("notes")], configure: { $0.hooks = ["notes": hooks] }
        ) { client in
            _ = try await client.send(.post, "/tables/notes", json: ["id": "keep", "text": "a"])
            let deleting = try await client.send(
                .put, "/tables/notes/keep", json: ["id": "keep", "deleted": true], headers: Self.v3, versioned: false)
            #expect(deleting.status == .conflict && deleting.error == "'keep' stays (delete)", "\(deleting.text)")
            #expect(try await client.send(.get, "/tables/notes/keep").json?["text"] == "a")
        }
        // The undelete hook: a tombstone brought back by a replace.
        let refuseUndelete = TableHooks(beforeUndelete: keep)
        try await Fixture.withServer(
            backend, tables: [Fixture.table("notes")], configure: { $0.hooks = ["notes": refuseUndelete] }
        ) { client in
            _ = try await client.send(.post, "/tables/notes", json: ["id": "keep", "text": "a"])
            _ = try await client.send(.delete, "/tables/notes/keep")
            let restoring = try await client.send(
                .put, "/tables/notes/keep?__includedeleted=true", json: ["id": "keep", "deleted": false],
                headers: Self.v3, versioned: false)
            #expect(restoring.status == .conflict && restoring.error == "'keep' stays (undelete)", "\(restoring.text)")
            #expect(try await client.send(.get, "/tables/notes/keep").status == .notFound)
        }
    }

    @Test(arguments: Backend.all) func aMembersRowReplacedWithoutItsRoleOrGroupIsRefusedOrKept(_ backend: Backend)
        async throws
    {
        let alice = try await MembershipScopeTests.token("alice")
        try await MembershipScopeTests.withLists(backend) { client in
            try await MembershipScopeTests.share(client)
            for (body, expected) in [
                (["id": "m3", "listId": "L1", "userId": "vera"] as JSONValue, HTTPResponse.Status.badRequest),
                (["id": "m3", "listId": "L1", "userId": "vera", "role": .null], .badRequest),
                (["id": "m3", "listId": "L1", "userId": "vera", "role": "admin"], .badRequest),
                (["id": "m3", "listId": "L1", "role": "editor"], .badRequest),
                (["id": "m3", "userId": "vera", "role": "editor"], .ok),
            ] {
                let reply = try await client.send(
                    .put, "/tables/ListMember/m3", json: body, headers: MembershipScopeTests.v3(alice), versioned: false
                )
                #expect(reply.status == expected, "\(body.serialized()): \(reply.text)")
            }
            let member = try await client.send(.get, "/tables/ListMember/m3", headers: alice).json
            #expect(member?["listId"] == "L1" && member?["role"] == "editor" && member?["userId"] == "vera")
        }
    }

    @Test(arguments: Backend.all) func ofSeveralCallersClaimingOneGroupAtOnceOneBecomesItsOwner(_ backend: Backend)
        async throws
    {
        let racers = ["ann", "ben", "cat", "dan"]
        var tokens: [String: HTTPFields] = [:]
        for racer in racers { tokens[racer] = try await MembershipScopeTests.token(racer) }
        let callers = tokens
        // The insert hook of the members table holds each claim until all four have passed the checks before the
        // store: the race at its widest, every time (checked before the insert, all four became owners).
        let barrier = Barrier(parties: racers.count)
        let hooks = TableHooks(beforeInsert: { _ in await barrier.arrive() })
        try await Fixture.withServer(
            backend, tables: MembershipScopeTests.tables, setup: .live,
            configure: {
                $0.auth = AuthTests.auth
                $0.hooks = ["listmember": hooks]
            }
        ) { client in
            // One connection each (the test client's requests share one, and would wait for each other).
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await http.shutdown() } }
            let url = "http://127.0.0.1:\(try #require(client.port))/tables/ListMember"
            for trial in 0..<5 {
                let group = "G\(trial)"
                let statuses = try await withThrowingTaskGroup(of: Int.self) { tasks in
                    for racer in racers {
                        tasks.addTask {
                            let member: JSONValue = [
                                "id": .string("\(group)-\(racer)"), "listId": .string(group), "userId": .string(racer),
                                "role": "owner",
                            ]
                            var request = HTTPClientRequest(url: url)
                            request.method = .POST
                            request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                            request.headers.add(name: "Content-Type", value: "application/json")
                            for field in callers[racer]! {
                                request.headers.add(name: field.name.rawName, value: field.value)
                            }
                            request.body = .bytes(ByteBuffer(bytes: member.serializedData()))
                            let response = try await http.execute(request, timeout: .seconds(60))
                            return Int(response.status.code)
                        }
                    }
                    return try await tasks.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.filter { $0 == 201 }.count == 1, "trial \(trial): \(statuses.sorted())")
                #expect(statuses.filter { $0 != 201 }.allSatisfy { $0 == 403 }, "trial \(trial): \(statuses.sorted())")
                var owners = 0
                for racer in racers {
                    owners += try await client.send(
                        .get, "/tables/ListMember?$filter=listId%20eq%20'\(group)'", headers: callers[racer]!
                    ).ids.count
                }
                #expect(owners == 1, "trial \(trial): one member row, its owner's")
            }
        }
    }

    @Test(arguments: Backend.all) func aGroupWhoseMembersLeftIsNotAStrangersToClaim(_ backend: Backend) async throws {
        let (alice, mallory) = (
            try await MembershipScopeTests.token("alice"), try await MembershipScopeTests.token("mallory")
        )
        try await MembershipScopeTests.withLists(backend) { client in
            try await MembershipScopeTests.share(client)
            // Every member of L1 leaves; its list and item stay.
            for member in ["m2", "m3", "m1"] {
                let reply = try await client.send(.delete, "/tables/ListMember/\(member)", headers: alice)
                #expect(reply.status == .ok, "\(member): \(reply.text)")
            }
            let claim: JSONValue = ["id": "x1", "listId": "L1", "userId": "mallory", "role": "owner"]
            let refused = try await client.send(.post, "/tables/ListMember", json: claim, headers: mallory)
            #expect(refused.status == .forbidden, "\(refused.text)")
            #expect(try await client.send(.get, "/tables/TodoItem/i1", headers: mallory).status == .notFound)
            // A group no one ever used is free, and its creator's retried claim is answered with its row.
            let fresh: JSONValue = ["id": "x2", "listId": "L9", "userId": "mallory", "role": "owner"]
            #expect(
                try await client.send(.post, "/tables/ListMember", json: fresh, headers: mallory).status == .created)
            #expect(
                try await client.send(.post, "/tables/ListMember", json: fresh, headers: mallory).status == .conflict)
        }
    }
}

/// Holds each arrival until `parties` have arrived, then lets them all go; and again for the next `parties`.
actor Barrier {
    private let parties: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(parties: Int) { self.parties = parties }

    func arrive() async {
        await withCheckedContinuation { continuation in
            waiting.append(continuation)
            if waiting.count == parties {
                waiting.forEach { $0.resume() }
                waiting.removeAll()
            }
        }
    }
}
