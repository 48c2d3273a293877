import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `e2e-server` (issue 31), the Node.js SDK's end-to-end test server on the library, as a process with
/// `sync-server`'s options: its seeded movies in SQL Server's order, the scripted `ParamsTestTable`, the custom APIs
/// (`runtimeInfo`, `movieFinder`, the permission echoes, `jwtTokenGenerator`) and a per-user table with the token it
/// hands out, the integer-id tables — on SQLite and PostgreSQL — then SIGTERM.
extension ProcessTests {
    @Suite struct E2EServerTests {
        @Test(.timeLimit(.minutes(2))) func theNodeE2EServerAnswersOnSQLite() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            // A configuration file's auth and tables are taken, as sync-server takes them.
            let config = directory.appendingPathComponent("server.json")
            try
                #"{"auth": {"hs256Secret": "a-secret-for-the-e2e-server-test-0123456789"}, "tables": [{"name": "extra"}]}"#
                .write(to: config, atomically: true, encoding: .utf8)
            try await Self.exercise(
                database: "sqlite:" + directory.appendingPathComponent("e2e.sqlite").path,
                options: ["--config", config.path])
        }

        @Test(.enabled(if: PostgresServer.isRequired), .timeLimit(.minutes(2)))
        func theNodeE2EServerAnswersOnPostgreSQL() async throws {
            try await PostgresServer.withDatabase { url in try await Self.exercise(database: url) }
        }

        static func exercise(database: String, options: [String] = []) async throws {
            let port = try freePort()
            try await withServerProcess(port: port, database: database, options: options, product: "e2e-server") {
                server in
                let http = E2EHTTP(port: port)

                let movies = try await http.send(.GET, "/tables/movies?$inlinecount=allpages&$top=1")
                #expect(movies.body?["count"] == 248)
                let titles = try await http.send(
                    .GET,
                    "/tables/movies?$filter=title%20ge%20'am'%20and%20title%20lt%20'an'&$orderby=title&$select=title")
                #expect(
                    titles.body?.arrayValue?.compactMap { $0["title"]?.stringValue }
                        == ["Amadeus", "Amélie", "American Beauty", "American History X", "Amores Perros"])

                let params = try await http.send(.GET, "/tables/ParamsTestTable?a=1&b=x%20y")
                let parameters = try JSONValue(
                    parsing: params.body?.arrayValue?.first?["parameters"]?.stringValue ?? "")
                #expect(parameters == ["a": "1", "b": "x y"])
                let patched = try await http.send(.PATCH, "/tables/ParamsTestTable/42?q=1", body: [:])
                #expect(patched.body?["id"] == 42)

                let features = try await http.send(.GET, "/api/runtimeInfo").body?["features"]
                #expect(features?["stringIdTables"] == true && features?["intIdTables"] == true)
                // The integer-id tables (issue 50): the movies by number, the round-trip table's ids given in turn.
                let byNumber = try await http.send(
                    .GET, "/tables/intIdMovies?$orderby=id%20desc&$top=2&$select=id,title")
                #expect(byNumber.body?.arrayValue?.compactMap { $0["id"]?.intValue } == [248, 247])
                #expect(try await http.send(.GET, "/tables/intIdMovies/1").body?["title"] == "The Shawshank Redemption")
                #expect(try await http.send(.GET, "/tables/intIdMovies/0").status == 404)
                let first = try await http.send(.POST, "/tables/IntIdRoundTripTable", body: ["string1": "Hey"])
                let second = try await http.send(.POST, "/tables/IntIdRoundTripTable", body: ["number": 12345.678])
                let (one, two) = (first.body?["id"]?.intValue ?? 0, second.body?["id"]?.intValue ?? 0)
                #expect(first.status == 201 && one > 0 && two == one + 1)
                let amelie = try await http.send(.GET, "/api/movieFinder/title/Am%C3%A9lie")
                #expect(amelie.body?["movies"]?.arrayValue?.first?["releaseDate"] == "2001-04-24T00:00:00.000Z")
                let sameYear = try await http.send(.POST, "/api/movieFinder/moviesOnSameYear", body: ["year": 1994])
                #expect(sameYear.body?["movies"]?.arrayValue?.count == 5)
                let echo = try await http.send(
                    .POST, "/api/applicationPermission?status=202&x=1", body: ["a": 1],
                    headers: ["x-test-zumo-first": "a"])
                #expect(echo.status == 202 && echo.headers["x-test-zumo-first"].first == "a")
                #expect(
                    echo.body == [
                        "method": "POST", "query": ["x": "1"], "body": ["a": 1], "user": ["level": "anonymous"],
                    ])
                #expect(try await http.send(.GET, "/api/userPermission").status == 401)

                let token = try #require(
                    try await http.send(.GET, "/api/jwtTokenGenerator").body?["token"]?["rawData"]?.stringValue)
                let signedIn = ["X-ZUMO-AUTH": token]
                #expect(try await http.send(.GET, "/api/userPermission", headers: signedIn).status == 200)
                #expect(try await http.send(.POST, "/tables/authenticated", body: ["text": "x"]).status == 401)
                let mine = try await http.send(
                    .POST, "/tables/authenticated", body: ["text": "mine"], headers: signedIn)
                #expect(mine.status == 201 && mine.body?["userId"] == "Facebook:someuserid@hotmail.com")
                #expect(
                    try await http.send(.GET, "/tables/authenticated", headers: signedIn).body?.arrayValue?.count == 1)
                if options.contains("--config") {
                    #expect(
                        try await http.send(.POST, "/tables/extra", body: ["x": 1], headers: signedIn).status == 201)
                }

                #expect(await server.terminate(within: .seconds(15)) != nil, "e2e-server stops on SIGTERM")
            }
        }
    }
}
