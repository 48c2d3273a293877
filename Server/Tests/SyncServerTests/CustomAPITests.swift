import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import SyncCore
import Testing

@testable import SyncServer

/// Custom APIs at `/api/{name}` (issue 31): JSON in and out, any method the API takes, query parameters, the
/// tables' version header and authentication, refusals with the app's message, and bad input answered, not crashed
/// on.
@Suite(.timeLimit(.minutes(3))) struct CustomAPITests {
    struct Greeting: Codable { var name: String }

    /// `echo` answers what it was sent; `greet` decodes a typed body; `refuse` always refuses; `fail` throws.
    static let apis = [
        CustomAPI("echo") { request in
            APIResponse(
                headers: [HTTPField.Name("X-Echo")!: "yes"],
                body: [
                    "method": .string(request.method.rawValue),
                    "parameters": .object(request.parameters.mapValues(JSONValue.string)),
                    "body": request.body ?? .null, "caller": request.caller.map { .string($0.subject) } ?? .null,
                ])
        },
        CustomAPI("greet", methods: [.post]) { request in
            let greeting = try request.decodeBody(as: Greeting.self)
            return try APIResponse(status: .created, encoding: ["hello": greeting.name])
        },
        CustomAPI("refuse") { _ in throw RequestRefusal(.forbidden, "Not on Sundays") },
        CustomAPI("fail") { _ in throw CocoaError(.fileNoSuchFile) },
        CustomAPI("nothing", methods: [.delete]) { _ in APIResponse(status: .noContent) },
    ]

    @Test func anAPIAnswersEachMethodWithItsParametersAndBody() async throws {
        try await Fixture.withServer(.sqlite, configure: { $0.apis = Self.apis }) { client in
            let get = try await client.send(.get, "/api/echo?a=1&b=x%20y&c=p+q&a=2")
            #expect(get.status == .ok)
            #expect(get["X-Echo"] == "yes")
            #expect(get.json?["method"] == "GET")
            #expect(get.json?["parameters"] == ["a": "2", "b": "x y", "c": "p q"])
            #expect(get.json?["body"] == .null)

            for method in [HTTPRequest.Method.post, .put, .patch, .delete] {
                let reply = try await client.send(method, "/api/echo", json: ["n": 1])
                #expect(reply.status == .ok)
                #expect(reply.json?["method"] == .string(method.rawValue))
                #expect(reply.json?["body"] == ["n": 1])
            }

            let greeted = try await client.send(.post, "/api/greet", json: ["name": "Ada"])
            #expect(greeted.status == .created)
            #expect(greeted.json == ["hello": "Ada"])

            let empty = try await client.send(.delete, "/api/nothing")
            #expect(empty.status == .noContent && empty.text.isEmpty)
        }
    }

    @Test func badCallsAreAnsweredWithTheReason() async throws {
        try await Fixture.withServer(.sqlite, configure: { $0.apis = Self.apis }) { client in
            // A method the API does not take: 405, with the ones it does.
            let get = try await client.send(.get, "/api/greet")
            #expect(get.status == .methodNotAllowed)
            #expect(get["Allow"] == "POST")
            // A body that does not decode, none at all, one that is not JSON.
            #expect(try await client.send(.post, "/api/greet", json: ["name": 3]).status == .badRequest)
            let none = try await client.send(.post, "/api/greet")
            #expect(none.status == .badRequest && none.error == "The request needs a JSON body")
            let text = try await client.send(.post, "/api/greet", body: "hi", headers: [.contentType: "text/plain"])
            #expect(text.status == .unsupportedMediaType)
            // The app's refusal, its message kept; an unexpected error is a 500 that does not leak it.
            let refused = try await client.send(.get, "/api/refuse")
            #expect(refused.status == .forbidden && refused.error == "Not on Sundays")
            let failed = try await client.send(.get, "/api/fail")
            #expect(failed.status == .internalServerError)
            #expect(!failed.text.contains("fileNoSuchFile") && !failed.text.contains("260"))
            // No version header: refused as a table request would be; an unknown API: 404.
            #expect(try await client.send(.get, "/api/echo", versioned: false).status == .badRequest)
            #expect(try await client.send(.get, "/api/unknown").status == .notFound)
        }
    }

    /// Issue 50 (the E2E suites call `applicationPermission` as `applicationpermission`, with text and XML bodies):
    /// names match without case, as on the Node.js and ASP.NET servers; an API that takes other bodies gets their
    /// bytes and type, and may answer with a body that is not JSON.
    @Test func namesMatchWithoutCaseAndOtherBodiesGoBothWays() async throws {
        var text = CustomAPI("Shout", methods: [.post]) { request in
            let said = request.otherBody.map { String(decoding: $0.bytes, as: UTF8.self) } ?? "(json)"
            return APIResponse(
                contentType: "text/plain", text: "\(said.uppercased()) as \(request.otherBody?.contentType ?? "-")")
        }
        text.takesOtherBodies = true
        try await Fixture.withServer(.sqlite, configure: { $0.apis = Self.apis + [text] }) { client in
            #expect(try await client.send(.get, "/api/ECHO?a=1").json?["parameters"] == ["a": "1"])
            #expect(try await client.send(.get, "/api/Echo/more").status == .ok)
            let shouted = try await client.send(
                .post, "/api/shout", body: "<hi/>", headers: [.contentType: "text/xml"])
            #expect(shouted.status == .ok && shouted.text == "<HI/> as text/xml")
            #expect(shouted[HTTPField.Name.contentType.rawName] == "text/plain")
            // JSON still arrives as JSON; an API that does not take other bodies still answers 415.
            #expect(try await client.send(.post, "/api/shout", json: ["a": 1]).text == "(JSON) as -")
            let refused = try await client.send(.post, "/api/GREET", body: "hi", headers: [.contentType: "text/plain"])
            #expect(refused.status == .unsupportedMediaType)
        }
    }

    @Test func anAPIHasTheTablesAuthentication() async throws {
        let alice = AuthTests.bearer(try await AuthTests.token("alice"))
        let root = AuthTests.bearer(try await AuthTests.token("root"))
        let apis = [
            Self.apis[0],
            CustomAPI("admin", access: .restricted(subjects: ["root"], roles: [])) { _ in APIResponse(body: "ok") },
            CustomAPI("claims") { request in APIResponse(body: .object(request.caller?.claims ?? [:])) },
            CustomAPI("public", access: .anonymous) { request in
                APIResponse(body: request.caller == nil ? "anyone" : "someone")
            },
        ]
        try await Fixture.withServer(
            .sqlite,
            configure: {
                $0.auth = AuthTests.auth
                $0.apis = apis
            }
        ) { (client: any TestClientProtocol) async throws in
            // By default an API needs a signed-in caller, as tables do, and it learns who called.
            #expect(try await client.send(.get, "/api/echo").status == .unauthorized)
            #expect(try await client.send(.get, "/api/echo", headers: alice).json?["caller"] == "alice")
            // The v2 clients' header works as well as the bearer one.
            let zumo: HTTPFields = [HTTPField.Name("X-ZUMO-AUTH")!: String(alice[.authorization]!.dropFirst(7))]
            #expect(try await client.send(.get, "/api/echo", headers: zumo).json?["caller"] == "alice")
            #expect(try await client.send(.get, "/api/admin", headers: alice).status == .forbidden)
            #expect(try await client.send(.get, "/api/admin", headers: root).json == "ok")
            #expect(try await client.send(.get, "/api/public").json == "anyone")
            // Every claim of the token reaches the API, not only those the server checks.
            let claims = try await client.send(.get, "/api/claims", headers: alice).json
            #expect(claims?["sub"] == "alice" && claims?["aud"] == "todo-app" && claims?["exp"] != nil)
            // A bad token is a 401 even where anyone may call.
            #expect(
                try await client.send(.get, "/api/public", headers: AuthTests.bearer("x.y.z")).status == .unauthorized)
        }
    }

    @Test func theVersionAsAQueryParameterFollowsTheTablesRule() async throws {
        for acceptsQuery in [false, true] {
            try await Fixture.withServer(
                .sqlite,
                configure: {
                    $0.apis = Self.apis
                    $0.acceptsVersionQueryForChanges = acceptsQuery
                }
            ) { (client: any TestClientProtocol) async throws in
                let get = try await client.send(.get, "/api/echo?ZUMO-API-VERSION=2.0.0", versioned: false)
                #expect(get.status == .ok)
                let post = try await client.send(.post, "/api/echo?ZUMO-API-VERSION=2.0.0", json: [:], versioned: false)
                #expect(post.status == (acceptsQuery ? .ok : .badRequest), "acceptsQuery: \(acceptsQuery)")
            }
        }
    }

    @Test func v3CallersAreServedToo() async throws {
        try await Fixture.withServer(.sqlite, configure: { $0.apis = Self.apis }) { client in
            let reply = try await client.send(
                .post, "/api/echo", json: ["v": 3], headers: [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"],
                versioned: false)
            #expect(reply.status == .ok && reply.json?["body"] == ["v": 3])
        }
    }

    @Test(arguments: ["", "a/b", "spa ce", String(repeating: "x", count: 129)])
    func aBadNameIsRefusedAtStartup(name: String) {
        var configuration = SyncServerConfiguration()
        configuration.apis = [CustomAPI(name) { _ in APIResponse() }]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }

    @Test func twoAPIsOfOneNameAreRefusedAtStartup() {
        var configuration = SyncServerConfiguration()
        configuration.apis = [CustomAPI("a") { _ in APIResponse() }, CustomAPI("A") { _ in APIResponse() }]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }
}

/// Custom APIs through a real socket, as clients that are not ours send: a chunked body with no length, a body past
/// the size limit, a large answer with and without gzip, and `Connection: close`.
@Suite(.timeLimit(.minutes(3))) struct CustomAPILiveTests {
    /// The buffers, one after another, as a body whose length the client does not know.
    static func stream(_ buffers: [ByteBuffer]) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            for buffer in buffers { continuation.yield(buffer) }
            continuation.finish()
        }
    }

    @Test func otherClientsBodiesAndEncodingsAreServed() async throws {
        let apis = [
            CustomAPI("echo") { request in APIResponse(body: request.body ?? .null) },
            CustomAPI("big", methods: [.get]) { _ in
                APIResponse(body: .array((0..<5000).map { .string("row \($0) of a large answer") }))
            },
        ]
        try await Fixture.withServer(.sqlite, setup: .live, configure: { $0.apis = apis }) {
            (client: any TestClientProtocol) async throws in
            let base = "http://127.0.0.1:\(try #require(client.port))/api/"
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            let decoding = HTTPClient(
                eventLoopGroupProvider: .singleton, configuration: .init(decompression: .enabled(limit: .none)))
            do {
                try await Self.exercise(base: base, http: http, decoding: decoding)
            } catch {
                try? await http.shutdown()
                try? await decoding.shutdown()
                throw error
            }
            try await http.shutdown()
            try await decoding.shutdown()
        }
    }

    static func exercise(base: String, http: HTTPClient, decoding: HTTPClient) async throws {
        func request(_ name: String, _ method: HTTPMethod = .GET) -> HTTPClientRequest {
            var request = HTTPClientRequest(url: base + name)
            request.method = method
            request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
            return request
        }

        // A chunked body (no Content-Length), in three pieces.
        var chunked = request("echo", .POST)
        chunked.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        let pieces = [#"{"a":"#, #"[1,2,"#, #"3]}"#].map { ByteBuffer(string: $0) }
        chunked.body = .stream(Self.stream(pieces), length: .unknown)
        let echoed = try await http.execute(chunked, timeout: .seconds(30))
        #expect(echoed.status == .ok)
        #expect(
            try JSONValue(parsing: String(buffer: try await echoed.body.collect(upTo: 1 << 20))) == ["a": [1, 2, 3]])

        // Past the body limit (1 MiB by default): 413, with or without a declared length.
        let large = ByteBuffer(string: "[\"" + String(repeating: "x", count: 2 << 20) + "\"]")
        for length: HTTPClientRequest.Body.Length in [.known(Int64(large.readableBytes)), .unknown] {
            var tooLarge = request("echo", .POST)
            tooLarge.headers.add(name: "Content-Type", value: "application/json")
            tooLarge.body = .stream(Self.stream([large]), length: length)
            // The server answers 413 and closes; AsyncHTTPClient, still sending, may report the closed channel
            // instead of the answer (Python's http.client and curl read the 413 every time: 20 of 20, 2–32 MB), as
            // either error (a whole-suite run met `remoteConnectionClosed`).
            do {
                let refused = try await http.execute(tooLarge, timeout: .seconds(30))
                #expect(refused.status.code == 413)
            } catch let error as ChannelError where error == .ioOnClosedChannel {
            } catch let error as HTTPClientError where error == .remoteConnectionClosed {}
        }
        // …and goes on serving.
        var after = request("echo", .POST)
        after.headers.add(name: "Content-Type", value: "application/json")
        after.body = .bytes(ByteBuffer(string: "[1]"))
        #expect(try await http.execute(after, timeout: .seconds(30)).status == .ok)

        // A large answer: plain when not asked, gzip when asked; `Connection: close` honoured.
        var plain = request("big")
        plain.headers.add(name: "Connection", value: "close")
        let plainAnswer = try await http.execute(plain, timeout: .seconds(30))
        #expect(plainAnswer.headers.first(name: "Content-Encoding") == nil)
        let plainBytes = try await plainAnswer.body.collect(upTo: 8 << 20)
        var gzip = request("big")
        gzip.headers.add(name: "Accept-Encoding", value: "gzip")
        let gzipAnswer = try await decoding.execute(gzip, timeout: .seconds(30))
        #expect(gzipAnswer.headers.first(name: "Content-Encoding") == "gzip")
        let unzipped = try await gzipAnswer.body.collect(upTo: 8 << 20)
        #expect(unzipped == plainBytes && plainBytes.readableBytes > 100_000)
    }
}

/// `SyncServerConfiguration.routes`: the app's own Hummingbird routes beside the tables, behind the server's
/// middleware (the verified caller, a bad token refused).
@Suite(.timeLimit(.minutes(3))) struct AppRoutesTests {
    @Test func theAppsOwnRoutesServeBesideTheTables() async throws {
        let alice = AuthTests.bearer(try await AuthTests.token("alice"))
        try await Fixture.withServer(
            .sqlite,
            configure: {
                $0.auth = AuthTests.auth
                $0.routes = { router in
                    router.get("hello") { _, context in "hello, \(context.caller?.subject ?? "stranger")" }
                }
            }
        ) { (client: any TestClientProtocol) async throws in
            #expect(try await client.send(.get, "/hello", versioned: false).text == "hello, stranger")
            #expect(try await client.send(.get, "/hello", headers: alice, versioned: false).text == "hello, alice")
            let forged = AuthTests.bearer("x.y.z")
            #expect(try await client.send(.get, "/hello", headers: forged, versioned: false).status == .unauthorized)
            // The tables are still the server's.
            #expect(try await client.send(.get, "/tables/TodoItem", headers: alice).status == .ok)
        }
    }
}
