import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// The console's server side (issue 19; the browser tests drive its pages): the pages and their assets, the API
/// they read — counts, rows newest first, the table API's `$filter` and its error words, deleted rows on demand —
/// on both stores; who may use it with auth (administrators, across users) and without (loopback, or enabled).
@Suite(.timeLimit(.minutes(3))) struct ConsoleTests {
    @Test(arguments: Backend.all) func pagesAndTheirAPIOnBothStores(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            for (text, complete) in [("Buy milk", false), ("Walk the dog", true), ("Call mom", false)] {
                let row: JSONValue = ["id": .string(text), "text": .string(text), "complete": .bool(complete)]
                #expect(try await client.send(.post, "/tables/TodoItem", json: row).status == .created)
            }
            #expect(try await client.send(.delete, "/tables/TodoItem/Call%20mom").status == .ok)

            for path in ["/console", "/console/tables/TodoItem"] {
                let page = try await client.send(.get, path, versioned: false)
                #expect(page.status == .ok)
                #expect(page["Content-Type"] == "text/html; charset=utf-8")
                #expect(page.text.contains("/console/assets/console.js"))
                #expect(page["Content-Security-Policy"]?.contains("default-src 'self'") == true)
            }
            #expect(try await client.send(.get, "/console/assets/console.js", versioned: false).status == .ok)
            #expect(try await client.send(.get, "/console/assets/console.css", versioned: false).status == .ok)

            let overview = try await client.send(.get, "/console/api/overview", versioned: false)
            #expect(overview.json?["status"] == "ok")
            #expect(overview.json?["database"] == .string(backend == .sqlite ? "sqlite" : "postgres"))
            #expect(
                overview.json?["tables"] == [
                    ["name": "TodoItem", "perUser": false, "softDelete": true, "live": 2, "deleted": 1]
                ])
            #expect((overview.json?["requests"]?.intValue ?? 0) >= 4)

            func rows(_ query: String) async throws -> Reply {
                try await client.send(.get, "/console/api/tables/todoitem?" + query, versioned: false)
            }
            // Newest first, live rows only, with the columns to show.
            let newest = try await rows("")
            #expect(
                newest.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["Walk the dog", "Buy milk"])
            #expect(newest.json?["count"] == 2)
            let columns = newest.json?["columns"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(Set(columns).isSuperset(of: ["id", "updatedAt", "version", "deleted", "text", "complete"]))
            // The API's $filter, its order and the deleted rows.
            let filtered = try await rows("$filter=complete%20eq%20true")
            #expect(filtered.json?["items"]?.arrayValue?.map { $0["text"] } == ["Walk the dog"])
            let all = try await rows("__includeDeleted=true&$orderby=text%20asc")
            #expect(all.json?["items"]?.arrayValue?.map { $0["text"] } == ["Buy milk", "Call mom", "Walk the dog"])
            #expect(all.json?["items"]?.arrayValue?[1]["deleted"] == true)
            // A filter the API refuses is refused in the API's words.
            let bad = "$filter=text%20eq"
            let refused = try await rows(bad)
            let api = try await client.send(.get, "/tables/TodoItem?" + bad)
            #expect(refused.status == .badRequest && api.status == .badRequest)
            #expect(refused.error != nil && refused.error == api.error)
            #expect(try await client.send(.get, "/console/api/tables/Nope", versioned: false).status == .notFound)
            #expect(try await client.send(.post, "/console/api/overview", versioned: false).status == .methodNotAllowed)
        }
    }

    /// Without auth the console reads every row, so it is on only where no one else can reach it, unless enabled.
    @Test func withoutAuthItIsOnOnlyOnLoopbackOrWhenEnabled() async throws {
        for (host, mode, on) in [
            ("127.0.0.1", ConsoleMode.automatic, true), ("::1", .automatic, true), ("0.0.0.0", .automatic, false),
            ("192.168.1.5", .automatic, false), ("0.0.0.0", .enabled, true), ("127.0.0.1", .disabled, false),
        ] {
            #expect(mode.isOn(host: host, authenticates: false) == on, "\(host) \(mode)")
        }
        #expect(ConsoleMode.automatic.isOn(host: "0.0.0.0", authenticates: true))
        #expect(!ConsoleMode.disabled.isOn(host: "0.0.0.0", authenticates: true))
        try await Fixture.withServer(.sqlite, configure: { $0.console = .disabled }) { (client) async throws in
            #expect(try await client.send(.get, "/console", versioned: false).status == .notFound)
            #expect(try await client.send(.get, "/console/api/overview", versioned: false).status == .notFound)
        }
    }

    /// With auth: the API needs an administrator (a role claim, or a listed subject) and reads every user's rows
    /// of a per-user table; the pages, which hold no data, load for anyone.
    @Test(arguments: Backend.all) func withAuthOnlyAdministratorsReadAndTheySeeEveryUser(_ backend: Backend)
        async throws
    {
        try await AuthTests.withServer(
            backend, configure: { $0.auth?.console = .restricted(subjects: ["root"], roles: ["admin"]) }
        ) {
            client in
            for user in ["alice", "bob"] {
                let headers = AuthTests.bearer(try await AuthTests.token(user))
                let row: JSONValue = ["id": .string("\(user)-1"), "text": .string("\(user)'s")]
                #expect(
                    try await client.send(.post, "/tables/TodoItem", json: row, headers: headers).status == .created)
            }
            #expect(try await client.send(.get, "/console", versioned: false).status == .ok)
            let anonymous = try await client.send(.get, "/console/api/overview", versioned: false)
            #expect(anonymous.status == .unauthorized)
            let user = AuthTests.bearer(try await AuthTests.token("alice"))
            #expect(
                try await client.send(.get, "/console/api/overview", headers: user, versioned: false).status
                    == .forbidden)
            for admin in [try await AuthTests.token("carol", roles: ["admin"]), try await AuthTests.token("root")] {
                let rows = try await client.send(
                    .get, "/console/api/tables/TodoItem?$orderby=id", headers: AuthTests.bearer(admin), versioned: false
                )
                #expect(rows.status == .ok)
                #expect(rows.json?["items"]?.arrayValue?.compactMap { $0["userId"]?.stringValue } == ["alice", "bob"])
            }
        }
        // An administrator is named: anyone, or any signed-in user, would read every user's rows.
        for access in [Access.anonymous, .authenticated] {
            var auth = AuthConfiguration(hs256Secret: AuthTests.secret)
            auth.console = access
            #expect(throws: ConfigurationError.self) { try auth.validate() }
        }
    }
}
