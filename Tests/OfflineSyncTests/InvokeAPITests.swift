import Foundation
import OfflineSync
import OfflineSyncTesting
import Testing

/// `SyncClient.invokeAPI` (issue 31) without a server: the request it sends, which failures it tries again (only
/// those of repeatable methods), the token refreshed once on a 401, and errors that carry the server's message.
@Suite(.timeLimit(.minutes(3))) struct InvokeAPITests {
    static func client(_ transport: ScriptedTransport, _ workspace: Workspace, tokens: PushStopTests.TokenLog? = nil)
        async throws -> SyncClient
    {
        try await PushStopTests.client(transport, workspace, tokens: tokens)
    }

    @Test func theRequestCarriesTheMethodBodyParametersAndHeaders() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.status(200, json: ["sum": 3])])
        let client = try await Self.client(transport, workspace)
        let answer = try await client.invokeAPI(
            "sum", method: "post", body: ["a": 1, "b": 2], parameters: ["round": "yes & no", "x": "1+1"],
            headers: [
                "X-Trace": "t1", "ZUMO-API-VERSION": "9.9.9", "Content-Type": "text/plain", "accept": "text/html",
            ])
        #expect(answer == ["sum": 3])
        let request = try #require(transport.requests.first)
        #expect(request.method == "POST")
        #expect(request.url.absoluteString == "http://127.0.0.1:9/api/sum?round=yes%20%26%20no&x=1%2B1")
        #expect(try JSONValue(parsing: request.body ?? Data()) == ["a": 1, "b": 2])
        #expect(request.headers["X-Trace"] == "t1")
        // The protocol's own fields are not the caller's to replace.
        #expect(request.headers["ZUMO-API-VERSION"] == "2.0.0")
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(request.headers.keys.filter { $0.lowercased() == "accept" } == ["Accept"])
        #expect(request.headers["X-ZUMO-FEATURES"] == "AJ")
    }

    struct Total: Codable, Equatable { var sum: Int }
    struct Terms: Codable, Sendable { var a: Int, b: Int }

    @Test func typedCallsEncodeTheBodyAndDecodeTheAnswer() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([
            .status(200, json: ["sum": 5]), .respond(HTTPResponseData(status: 204)), .status(200, json: ["sum": "x"]),
        ])
        let client = try await Self.client(transport, workspace)
        #expect(try await client.invokeAPI("sum", body: Terms(a: 2, b: 3), as: Total.self) == Total(sum: 5))
        #expect(try await client.invokeAPI("nothing", as: Total?.self) == nil)
        let error = await #expect(throws: APICallError.self) { try await client.invokeAPI("sum", as: Total.self) }
        #expect(error?.status == 200)
        #expect(transport.requests.map(\.method) == ["POST", "GET", "GET"])
    }

    @Test(arguments: [APIMethod.get, .put, "delete"])
    func aRepeatableCallIsTriedAgainAfterATransientFailure(method: APIMethod) async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.fail(.timedOut), .status(503, json: nil), .status(200, json: "ok")])
        let client = try await Self.client(transport, workspace)
        #expect(try await client.invokeAPI("job", method: method) == "ok")
        #expect(transport.requests.count == 3)
    }

    @Test(arguments: [APIMethod.post, .patch])
    func aCallThatMayNotBeRepeatedIsSentOnce(method: APIMethod) async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.fail(.timedOut), .status(503, json: ["error": "Busy"])])
        let client = try await Self.client(transport, workspace)
        // No answer: the server may have done the work, so the call is not sent again.
        let noReply = await #expect(throws: TransportError.self) { try await client.invokeAPI("job", method: method) }
        #expect(noReply?.code == .timedOut)
        #expect(transport.requests.count == 1)
        // A transient status is the answer, not a reason to send it again.
        let busy = await #expect(throws: APICallError.self) { try await client.invokeAPI("job", method: method) }
        #expect(busy?.status == 503 && busy?.message == "Busy")
        #expect(transport.requests.count == 2)
    }

    @Test func triesThatEndOnATransientStatusThrowItWithTheServersMessage() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport(Array(repeating: .status(503, json: ["error": "Maintenance"]), count: 4))
        let client = try await Self.client(transport, workspace)
        let error = await #expect(throws: APICallError.self) { try await client.invokeAPI("job", method: "GET") }
        #expect(error?.status == 503)
        #expect(error?.message == "Maintenance")
        #expect(error?.localizedDescription == "API job answered 503: Maintenance")
        #expect(transport.requests.count == 4)  // the first try and the three retries
    }

    @Test func aRefusalCarriesTheServersMessageAndBody() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([.status(400, json: ["error": "'a' must be a number", "field": "a"])])
        let client = try await Self.client(transport, workspace)
        let error = await #expect(throws: APICallError.self) { try await client.invokeAPI("sum", body: ["a": "x"]) }
        #expect(error?.message == "'a' must be a number")
        #expect(error?.body?["field"] == "a")
        #expect(transport.requests.count == 1)
    }

    @Test func a401AsksTheTokenProviderAgainOnce() async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport([
            .status(401, json: ["error": "expired"]), .status(200, json: "ok"),
            .status(401, json: ["error": "expired"]), .status(401, json: ["error": "revoked"]),
        ])
        let tokens = PushStopTests.TokenLog()
        let client = try await Self.client(transport, workspace, tokens: tokens)
        #expect(try await client.invokeAPI("me", method: "GET") == "ok")
        #expect(transport.requests.map { $0.headers["X-ZUMO-AUTH"] } == ["stale-token", "fresh-token"])
        let error = await #expect(throws: APICallError.self) { try await client.invokeAPI("me", method: "GET") }
        #expect(error?.status == 401 && error?.message == "revoked")
        #expect(tokens.calls == [false, true, false, true])
    }

    @Test(arguments: ["", "a/b", "a b", "../x"])
    func aBadNameSendsNothing(name: String) async throws {
        let workspace = try Workspace()
        let transport = ScriptedTransport()
        let client = try await Self.client(transport, workspace)
        await #expect(throws: ValueError.self) { try await client.invokeAPI(name) }
        await #expect(throws: ValueError.self) { try await client.invokeAPI("ok", method: "GET /x") }
        #expect(transport.requests.isEmpty)
    }

    /// Header names compare without case: a field set again under another case replaces the first, and two lists of
    /// the same fields are equal whatever the case of their names.
    @Test func headerNamesCompareWithoutCase() {
        var headers: APIHeaders = ["X-Trace": "t1", "x-trace": "t2", "Accept-Language": "fr"]
        #expect(headers["X-TRACE"] == "t2" && Array(headers).count == 2)
        headers["accept-language"] = nil
        #expect(Array(headers).map(\.name) == ["x-trace"])
        #expect(headers == ["X-Trace": "t2"])
        #expect(APIMethod("propfind").description == "PROPFIND" && !APIMethod("propfind").isRepeatable)
    }
}
