import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Metrics
import Prometheus
import SyncCore
import Testing
import Yams

@testable import SyncServer

@Suite(.timeLimit(.minutes(3))) struct ServiceRoutesTests {
    /// Each route is in the document of each dialect that answers it: /openapi.yaml has every route but PUT on an item
    /// (v3's replace; 405 under 2.0.x), /openapi-v3.yaml every table route but PATCH and POST on an item (v2's
    /// update and undelete; 405 under 3.0.x).
    @Test func everyRegisteredRouteIsInTheOpenAPIDocumentOfEachDialectThatAnswersIt() async throws {
        let directory = try TemporaryDirectory()
        let configuration = Fixture.configuration(.sqlite(path: directory.databasePath))
        let router = try await buildRouter(configuration, store: try SQLiteTableStore(path: directory.databasePath))
        func paths(_ document: OpenAPIDocument) throws -> [String: Any] {
            let loaded = try #require(try Yams.load(yaml: try document.load()) as? [String: Any])
            return try #require(loaded["paths"] as? [String: Any])
        }
        let (v2, v3) = (try paths(.v2), try paths(.v3))
        let registered = router.routes.map { route in
            // Hummingbird writes captures as {name}; the document names them {table} and {id}.
            let path =
                "/"
                + route.path.description.split(separator: "/").map { segment in
                    segment == "{name}" ? "{table}" : String(segment)
                }.joined(separator: "/")
            return (path, route.method.rawValue.lowercased())
        }
        #expect(registered.count == 23)
        let v3Only: Set<String> = ["put /tables/{table}/{id}"]
        let v2Only: Set<String> = ["patch /tables/{table}/{id}", "post /tables/{table}/{id}"]
        for (path, method) in registered {
            let route = "\(method) \(path)"
            if !v3Only.contains(route) {
                #expect((v2[path] as? [String: Any])?[method] != nil, "\(route) is missing from openapi.yaml")
            }
            if path.hasPrefix("/tables"), !v2Only.contains(route) {
                #expect((v3[path] as? [String: Any])?[method] != nil, "\(route) is missing from openapi-v3.yaml")
            }
        }
        #expect(v3.keys.allSatisfy { $0.hasPrefix("/tables") })
    }

    /// `/ready` (a balancer's readiness check) is 200 while the database answers and holds this server's bookkeeping,
    /// and 503 with the reason once the database has a step of a newer release's; it needs no token.
    @Test(arguments: Backend.all) func readyIsWhetherTheDatabaseServesThisServersBookkeeping(_ backend: Backend)
        async throws
    {
        try await TestDatabase.with(backend) { database in
            var configuration = Fixture.configuration(database)
            configuration.auth = AuthConfiguration(hs256Secret: String(repeating: "k", count: 32))
            try await buildApplication(configuration).test(.router) { client in
                let ready = try await client.send(
                    .get, "/ready", headers: [.authorization: "Bearer garbage"], versioned: false)
                #expect(ready.status == .ok)
                #expect(ready.json == ["status": "ready"])
                switch database {
                case .sqlite(let path):
                    let queue = try DatabaseQueue(path: path)
                    try await queue.write { db in
                        try db.execute(
                            sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from a newer release')")
                    }
                case .postgres(let url):
                    try await DatabaseURL(parsing: url).execute(
                        #"INSERT INTO "__sync_migrations" ("version", "name") VALUES (99, 'from a newer release')"#)
                }
                let refused = try await client.send(.get, "/ready", versioned: false)
                #expect(refused.status == .serviceUnavailable)
                #expect(refused.json?["status"] == "unavailable")
                let reason = refused.json?["reason"]?.stringValue ?? ""
                #expect(reason.contains(backend == .sqlite ? "v99: from a newer release" : "version 99"), "\(reason)")
                // Liveness does not look at the database.
                #expect(try await client.send(.get, "/health", versioned: false).status == .ok)
            }
        }
    }

    /// A SQLite database a newer release set up is refused at start with a message saying so, and left as it is.
    @Test func aSQLiteDatabaseOfANewerReleaseIsRefusedAndLeftAlone() async throws {
        let directory = try TemporaryDirectory()
        _ = try SQLiteTableStore(path: directory.databasePath)
        let queue = try DatabaseQueue(path: directory.databasePath)
        try await queue.write { db in
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4: integer ids'")
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from a newer release')")
        }
        let error = #expect(throws: TableStoreError.self) { try SQLiteTableStore(path: directory.databasePath) }
        #expect(
            error?.description.contains(
                "was set up by a newer sync-server (bookkeeping steps v99: from a newer release are unknown") == true,
            "\(String(describing: error))")
        // Untouched: the step this release would add is still missing.
        let applied = try await queue.read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(!applied.contains("v4: integer ids"))
    }

    @Test(arguments: Backend.all) func servesTheOpenAPIDocumentAndHealth(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            for path in ["/openapi.yaml", "/openapi-v3.yaml"] {
                let document = try await client.send(.get, path, versioned: false)
                #expect(document.status == .ok)
                #expect(document.text.hasPrefix("openapi: 3.1.0"))
            }
            let health = try await client.send(.get, "/health", versioned: false)
            #expect(health.json == ["status": "ok"])
        }
    }

    @Test(arguments: Backend.all) func metricsCountRequestsByRouteConflictsAndRows(_ backend: Backend) async throws {
        let registry = PrometheusCollectorRegistry()
        try await withMetricsFactory(PrometheusMetricsFactory(registry: registry)) {
            try await Fixture.withServer(backend, configure: { $0.metricsRegistry = registry }) { client in
                _ = try await client.send(.post, "/tables/TodoItem", json: ["id": "a"])
                _ = try await client.send(.post, "/tables/TodoItem", json: ["id": "a"])
                _ = try await client.send(.get, "/tables/TodoItem")
                let metrics = try await client.send(.get, "/metrics", versioned: false)
                #expect(metrics.status == .ok)
                #expect(
                    metrics.text.contains(
                        #"hb_requests{http_route="/tables/{name}",http_request_method="POST",http_response_status_code="409"} 1"#
                    ))
                #expect(metrics.text.contains(#"sync_conflicts{sync_table="todoitem"} 1"#))
                #expect(metrics.text.contains(#"sync_rows_returned{sync_table="todoitem"} 1"#))
            }
        }
    }

    /// Issue 14: each refusal counts by its reason.
    @Test func refusalsCountByReason() async throws {
        let registry = PrometheusCollectorRegistry()
        try await withMetricsFactory(PrometheusMetricsFactory(registry: registry)) {
            try await Fixture.withServer(.sqlite, configure: { $0.metricsRegistry = registry }) { client in
                _ = try await client.send(.put, "/tables/TodoItem", json: ["id": "a"])
                _ = try await client.send(.get, "/tables/TodoItem?$orderby=id,id")
                _ = try await client.send(.get, "/tables/TodoItem", versioned: false)
                _ = try await client.send(.post, "/tables/TodoItem", body: "{}", headers: [.contentType: "text/plain"])
                let metrics = try await client.send(.get, "/metrics", versioned: false).text
                for reason in ["method_not_allowed", "query_cost", "api_version", "unsupported_media_type"] {
                    #expect(metrics.contains(#"sync_refusals{sync_reason="\#(reason)"} 1"#), "\(reason)")
                }
            }
        }
    }

    /// Issue 14, point 10: a method a path does not take was a 404; the OpenAPI document says 405.
    @Test func aMethodAPathDoesNotTakeIs405WithAllow() async throws {
        try await Fixture.withServer(.sqlite) { client in
            let put = try await client.send(.put, "/tables/TodoItem", json: ["id": "a"])
            #expect(put.status == .methodNotAllowed)
            #expect(put.headers[.allow] == "GET, POST")
            #expect(put.error == "PUT is not allowed here; use GET, POST")
            let putItem = try await client.send(.put, "/tables/TodoItem/a", json: ["id": "a"])
            #expect(putItem.headers[.allow] == "GET, PATCH, DELETE, POST")
            // An item's methods in the Datasync dialect (schemathesis found v2's listed under 3.0.0).
            let v3 = HTTPFields([HTTPField(name: HTTPField.Name("ZUMO-API-VERSION")!, value: "3.0.0")])
            for method in [HTTPRequest.Method.options, .patch, .post] {
                let refused = try await client.send(
                    method, "/tables/TodoItem/a", json: [:], headers: v3, versioned: false)
                #expect(refused.status == .methodNotAllowed)
                #expect(refused.headers[.allow] == "GET, PUT, DELETE", "\(method)")
            }
            let trace = try await client.send(.trace, "/metrics", versioned: false)
            #expect(trace.status == .methodNotAllowed)
            #expect(try await client.send(.get, "/nowhere", versioned: false).status == .notFound)
        }
    }

    @Test(arguments: Backend.all) func metricsAre404WhenNoRegistryIsConfigured(_ backend: Backend) async throws {
        try await Fixture.withServer(backend) { client in
            let reply = try await client.send(.get, "/metrics", versioned: false)
            #expect(reply.status == .notFound)
        }
    }
}
