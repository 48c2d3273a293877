import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import Metrics
import Prometheus
import SyncCore
import Testing

@testable import SyncServer

/// Tokens and per-user tables (issue 15): who may call, and whose rows they see.
@Suite(.timeLimit(.minutes(3))) struct AuthTests {
    static let secret = "a-development-secret-of-32-bytes-or-more"
    static let audience = "todo-app"

    /// A token for `subject`, valid now unless `age` says when it expired.
    static func token(
        _ subject: String, secret: String = secret, audience: String? = audience, lifetime: Duration = .seconds(600),
        roles: Set<String> = [], now: Date = Date()
    ) async throws -> String {
        try await makeHS256Token(
            subject: subject, secret: secret, lifetime: lifetime, audience: audience, roles: roles, now: now)
    }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    /// The auth section of these tests' servers: tokens signed with ``secret`` for ``audience``.
    static var auth: AuthConfiguration {
        var auth = AuthConfiguration(hs256Secret: secret)
        auth.audience = audience
        return auth
    }

    /// The tables of these tests: per-user `TodoItem` (page size 2, so that paging shows), `Notes` open to any
    /// signed-in user, `Board` readable by anyone, `Archive` whose deletes are disabled, `Admin` for `root`
    /// and the `ops` role.
    static var tables: [TableConfiguration] {
        var todo = Fixture.table("TodoItem", pageSize: 2)
        todo.perUser = true
        var board = Fixture.table("Board")
        board.access[.read] = .anonymous
        var archive = Fixture.table("Archive")
        archive.access[.delete] = .disabled
        var admin = Fixture.table("Admin")
        admin.access = Dictionary(
            uniqueKeysWithValues: TableOperation.allCases.map { ($0, .restricted(subjects: ["root"], roles: ["ops"])) })
        return [todo, Fixture.table("Notes"), board, archive, admin]
    }

    static func withServer<T: Sendable>(
        _ backend: Backend, setup: TestingSetup = .router,
        configure: (inout SyncServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        try await Fixture.withServer(
            backend, tables: tables, setup: setup,
            configure: {
                $0.auth = auth
                configure(&$0)
            }, body)
    }

    /// Every request a client can make of a per-user table, for the access matrix.
    static let requests: [(name: String, method: HTTPRequest.Method, path: String, body: JSONValue?)] = [
        ("read", .get, "/tables/TodoItem/b1", nil),
        ("query", .get, "/tables/TodoItem", nil),
        ("page count", .get, "/tables/TodoItem?$inlinecount=allpages&$top=0", nil),
        ("insert", .post, "/tables/TodoItem", ["id": "x1", "text": "mine"]),
        ("update", .patch, "/tables/TodoItem/b1", ["text": "changed"]),
        ("delete", .delete, "/tables/TodoItem/b1", nil),
        ("undelete", .post, "/tables/TodoItem/b1", nil),
    ]

    /// The access matrix: anonymous, expired, forged, wrong-audience and `alg: none` callers get a 401 for every
    /// request; user A sees and changes only A's rows (B's are 404, B's id is a 409 without an item, paging and
    /// counts cover A's rows alone); afterwards B's rows are exactly as B left them. On both stores.
    @Test(arguments: Backend.all)
    func theAccessMatrixHasNoCrossUserReadOrWrite(_ backend: Backend) async throws {
        let alice = try await Self.token("alice")
        let bob = try await Self.token("bob")
        let refused: [(String, HTTPFields)] = [
            ("anonymous", [:]),
            ("expired", Self.bearer(try await Self.token("alice", now: Date().addingTimeInterval(-7200)))),
            ("forged", Self.bearer(try await Self.token("alice", secret: "another-secret-of-at-least-32-bytes!!"))),
            ("wrong audience", Self.bearer(try await Self.token("alice", audience: "another-app"))),
            ("alg none", Self.bearer(Self.unsigned(["sub": "alice", "exp": 4_000_000_000, "aud": "todo-app"]))),
            ("malformed", Self.bearer("not.a.token")),
            ("basic", [.authorization: "Basic YWxpY2U6c2VjcmV0"]),
        ]
        try await Self.withServer(backend) { client in
            for id in ["a1", "a2", "a3"] {
                let insert = try await client.send(
                    .post, "/tables/TodoItem", json: ["id": .string(id), "text": "alice's"], headers: Self.bearer(alice)
                )
                #expect(insert.status == .created)
                #expect(insert.json?["userId"] == "alice")
            }
            let bobsItem = try await client.send(
                .post, "/tables/TodoItem", json: ["id": "b1", "text": "bob's", "userId": "alice"],
                headers: [AuthenticationMiddleware.zumoAuth: bob])
            #expect(bobsItem.status == .created)
            #expect(bobsItem.json?["userId"] == "bob", "a userId in the body is ignored")

            for (caller, headers) in refused {
                for request in Self.requests {
                    let reply = try await client.send(
                        request.method, request.path, json: request.body, headers: headers)
                    #expect(reply.status == .unauthorized, "\(caller) \(request.name)")
                    #expect(reply["WWW-Authenticate"]?.hasPrefix("Bearer realm=\"sync-server\"") == true)
                    #expect(!reply.text.contains(alice) && !reply.text.contains("YWxpY2U6c2VjcmV0"))
                }
            }

            let asAlice = Self.bearer(alice)
            #expect(try await client.send(.get, "/tables/TodoItem/a1", headers: asAlice).status == .ok)
            for request in Self.requests where request.path.hasSuffix("/b1") {
                let reply = try await client.send(request.method, request.path, json: request.body, headers: asAlice)
                #expect(reply.status == .notFound, "alice \(request.name) of bob's row")
                #expect(reply.error == "The item does not exist")
            }
            let taken = try await client.send(
                .post, "/tables/TodoItem", json: ["id": "b1", "text": "mine now"], headers: asAlice)
            #expect(taken.status == .conflict)
            #expect(taken.json?["id"] == nil && taken.json?["text"] == nil && taken.headers[.eTag] == nil)
            #expect(taken.error == "An item with this id already exists")

            var seen: [String] = []
            var next: String? = "/tables/TodoItem?$inlinecount=allpages"
            while let path = next {
                let page = try await client.send(.get, path, headers: asAlice)
                #expect(page.status == .ok)
                #expect(page.json?["count"] == 3)
                seen += page.ids
                next = page["Link"].flatMap { URL(string: String($0.dropLast("; rel=next".count))) }.map {
                    $0.path + "?" + ($0.query ?? "")
                }
            }
            #expect(seen == ["a1", "a2", "a3"])
            let filtered = try await client.send(.get, "/tables/TodoItem?$filter=userId%20eq%20'bob'", headers: asAlice)
            #expect(filtered.ids == [])

            let asBob = Self.bearer(bob)
            let bobs = try await client.send(.get, "/tables/TodoItem?__includedeleted=true", headers: asBob)
            #expect(bobs.ids == ["b1"])
            #expect(bobs.items.first?["text"] == "bob's")
            #expect(bobs.items.first?["version"] == bobsItem.json?["version"], "bob's row was never written")
            #expect(try await client.send(.get, "/tables/TodoItem/a1", headers: asBob).status == .notFound)
        }
    }

    /// CORS is off by default; configured, the allowed origin's preflight is answered and its answers — a 401
    /// too — are readable with `ETag` and `Link` exposed, while another origin gets no CORS header.
    @Test func crossOriginRequestsFollowTheConfiguration() async throws {
        let page: HTTPFields = [.origin: "https://app.example.com"]
        let preflight: HTTPFields = [
            .origin: "https://app.example.com", .accessControlRequestMethod: "PATCH",
            .accessControlRequestHeaders: "authorization, zumo-api-version, content-type",
        ]
        try await Self.withServer(.sqlite) { client in
            let closed = try await client.send(.get, "/tables/Board", headers: page)
            #expect(closed.status == .ok && closed.headers[.accessControlAllowOrigin] == nil)
        }
        try await Self.withServer(
            .sqlite, configure: { $0.cors = CORSConfiguration(allowedOrigins: ["https://app.example.com"]) }
        ) {
            client in
            let answer = try await client.send(.options, "/tables/TodoItem/a1", headers: preflight, versioned: false)
            #expect(answer.status == .noContent)
            #expect(answer.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(answer.headers[.accessControlAllowMethods]?.contains("PATCH") == true)
            #expect(answer.headers[.accessControlAllowHeaders]?.contains("Authorization") == true)

            let board = try await client.send(.get, "/tables/Board", headers: page)
            #expect(board.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(board.headers[.accessControlExposeHeaders]?.contains("ETag, Link") == true)
            let refused = try await client.send(.get, "/tables/Notes", headers: page)
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[.accessControlAllowOrigin] == "https://app.example.com")

            let other = try await client.send(.get, "/tables/Board", headers: [.origin: "https://evil.example.com"])
            #expect(other.headers[.accessControlAllowOrigin] == nil)
            let otherPreflight = try await client.send(
                .options, "/tables/Board",
                headers: [.origin: "https://evil.example.com", .accessControlRequestMethod: "POST"], versioned: false)
            #expect(otherPreflight.headers[.accessControlAllowOrigin] == nil)
        }
    }

    /// A development token can carry claims of the app's (a tenant, say) that reach hooks as `Caller.claims`; one that
    /// the other parameters set is refused rather than silently written twice.
    @Test func developmentTokensCarryMoreClaims() async throws {
        let verifier = try await TokenVerifier(Self.auth, now: { Date() })
        let token = try await makeHS256Token(
            subject: "alice", secret: Self.secret, audience: Self.audience, roles: ["ops"],
            claims: ["tenant": "acme", "seats": 3])
        let caller = try await verifier.verify(token)
        #expect(caller.subject == "alice" && caller.roles == ["ops"])
        #expect(caller.claims["tenant"] == "acme" && caller.claims["seats"] == 3)
        await #expect(throws: ConfigurationError("claims: 'sub' is set by its own parameter")) {
            try await makeHS256Token(subject: "alice", secret: Self.secret, claims: ["sub": "mallory"])
        }
    }

    /// An unsigned token (`alg: none`), as an attacker would send one.
    static func unsigned(_ claims: JSONValue) -> String {
        func encoded(_ value: JSONValue) -> String {
            Data(value.serialized().utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        return encoded(["alg": "none", "typ": "JWT"]) + "." + encoded(claims) + "."
    }

    /// 401 for a missing token with the bare challenge, 403 for a signed-in caller not on the list, 405 for a
    /// disabled operation (with the methods that remain), and `/health` open even with a bad token.
    @Test func statusesSayWhatIsMissing() async throws {
        let alice = Self.bearer(try await Self.token("alice"))
        try await Self.withServer(.sqlite) { client in
            let anonymous = try await client.send(.get, "/tables/Notes")
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous["WWW-Authenticate"] == #"Bearer realm="sync-server""#)
            #expect(anonymous.error?.contains("Authorization: Bearer") == true)

            let expired = try await client.send(
                .get, "/tables/Notes",
                headers: Self.bearer(try await Self.token("alice", now: Date().addingTimeInterval(-7200))))
            #expect(expired["WWW-Authenticate"]?.contains(#"error="invalid_token""#) == true)
            #expect(expired.error == "Unauthorized: the token has expired: sign in again")

            #expect(try await client.send(.get, "/tables/Board").status == .ok)
            #expect(try await client.send(.post, "/tables/Board", json: ["text": "hi"]).status == .unauthorized)
            #expect(
                try await client.send(.post, "/tables/Board", json: ["text": "hi"], headers: alice).status == .created)

            let inserted = try await client.send(.post, "/tables/Archive", json: ["id": "k"], headers: alice)
            #expect(inserted.status == .created)
            let delete = try await client.send(.delete, "/tables/Archive/k", headers: alice)
            #expect(delete.status == .methodNotAllowed)
            #expect(delete.headers[.allow] == "GET, PATCH, POST")

            #expect(try await client.send(.get, "/tables/Admin", headers: alice).status == .forbidden)
            let root = Self.bearer(try await Self.token("root"))
            #expect(try await client.send(.get, "/tables/Admin", headers: root).status == .ok)
            let ops = Self.bearer(try await Self.token("carol", roles: ["ops"]))
            #expect(try await client.send(.post, "/tables/Admin", json: ["id": "z"], headers: ops).status == .created)

            let health = try await client.send(.get, "/health", headers: Self.bearer("garbage"), versioned: false)
            #expect(health.status == .ok)
        }
    }

    /// `/metrics` and `/openapi.yaml` can require a caller; every auth refusal counts by its reason.
    @Test func serviceRoutesCanBeRestrictedAndRefusalsCount() async throws {
        let registry = PrometheusCollectorRegistry()
        try await withMetricsFactory(PrometheusMetricsFactory(registry: registry)) {
            try await Self.withServer(
                .sqlite,
                configure: {
                    $0.metricsRegistry = registry
                    $0.auth?.metrics = .restricted(subjects: ["root"], roles: [])
                    $0.auth?.openAPI = .authenticated
                }
            ) { client in
                #expect(try await client.send(.get, "/openapi.yaml", versioned: false).status == .unauthorized)
                let alice = Self.bearer(try await Self.token("alice"))
                #expect(try await client.send(.get, "/openapi.yaml", headers: alice, versioned: false).status == .ok)
                #expect(try await client.send(.get, "/metrics", headers: alice, versioned: false).status == .forbidden)
                _ = try await client.send(.get, "/tables/Notes", headers: Self.bearer("x.y.z"))
                _ = try await client.send(
                    .get, "/tables/Notes",
                    headers: Self.bearer(try await Self.token("alice", now: Date().addingTimeInterval(-7200))))
                _ = try await client.send(.delete, "/tables/Archive/k", headers: alice)
                let root = Self.bearer(try await Self.token("root"))
                let metrics = try await client.send(.get, "/metrics", headers: root, versioned: false).text
                for reason in ["auth_missing", "auth_forbidden", "auth_malformed", "auth_expired", "access_disabled"] {
                    #expect(metrics.contains(#"sync_refusals{sync_reason="\#(reason)"} 1"#), "\(reason)")
                }
            }
        }
    }

    /// RS256 and ES256 tokens verify with the keys of a JWKS file; an algorithm never picks a key of another
    /// kind: an HS256 token signed with the RSA public key (the classic confusion), an RS256 token naming the
    /// EC key, and `none` are all refused; `nbf` in the future, another issuer and a missing `exp` too.
    @Test func publicKeyTokensVerifyAndAlgorithmsAreNotConfused() async throws {
        let directory = try TemporaryDirectory()
        let rsa = try Insecure.RSA.PrivateKey(pem: Self.rsaPEM)
        let ec = ES256PrivateKey()
        let (modulus, exponent) = try rsa.publicKey.getKeyPrimitives()
        let parameters = try #require(ec.publicKey.parameters)
        let jwks: JSONValue = [
            "keys": [
                [
                    "kty": "RSA", "kid": "rsa-1", "use": "sig", "n": .string(Self.base64URL(modulus)),
                    "e": .string(Self.base64URL(exponent)),
                ],
                ["kty": "EC", "kid": "ec-1", "crv": "P-256", "x": .string(parameters.x), "y": .string(parameters.y)],
            ]
        ]
        let file = directory.url.appendingPathComponent("keys.json")
        try jwks.serialized().write(to: file, atomically: true, encoding: .utf8)
        var configuration = AuthConfiguration()
        configuration.jwksFile = file.path
        configuration.issuer = "https://id.example.com/"
        let verifier = try await TokenVerifier(configuration, now: { Date() })

        let keys = JWTKeyCollection()
        await keys.add(rsa: rsa, digestAlgorithm: .sha256, kid: "rsa-1")
        await keys.add(ecdsa: ec, kid: "ec-1")
        await keys.add(hmac: HMACKey(from: rsa.publicKey.pemRepresentation), digestAlgorithm: .sha256, kid: "confused")
        var claims = Claims(
            subject: "alice", expiry: Date().addingTimeInterval(600), issuer: "https://id.example.com/", audience: nil,
            roles: ["ops"])
        #expect(try await verifier.verify(try await keys.sign(claims, kid: "rsa-1")).subject == "alice")
        #expect(try await verifier.verify(try await keys.sign(claims, kid: "ec-1")).roles == ["ops"])

        func refusal(_ token: String) async -> String? {
            do {
                _ = try await verifier.verify(token)
                return nil
            } catch { return error.reason.rawValue }
        }
        #expect(await refusal(try await keys.sign(claims, kid: "confused")) == "auth_algorithm")
        let rs256NamingTheECKey = try await Self.resigned(
            keys, claims, header: ["alg": "RS256", "kid": "ec-1"], rsa: rsa)
        #expect(await refusal(rs256NamingTheECKey) == "auth_algorithm")
        #expect(await refusal(Self.unsigned(["sub": "alice", "exp": 4_000_000_000])) == "auth_algorithm")
        claims.nbf = NotBeforeClaim(value: Date().addingTimeInterval(3600))
        #expect(await refusal(try await keys.sign(claims, kid: "rsa-1")) == "auth_not_yet_valid")
        claims.nbf = nil
        claims.iss = "https://elsewhere.example.com/"
        #expect(await refusal(try await keys.sign(claims, kid: "rsa-1")) == "auth_issuer")
        claims.iss = "https://id.example.com/"
        claims.exp = nil
        #expect(await refusal(try await keys.sign(claims, kid: "rsa-1")) == "auth_expired")
    }

    /// A token whose header is `header`, signed with the RSA key (to test what the header alone decides).
    static func resigned(_ keys: JWTKeyCollection, _ claims: Claims, header: JSONValue, rsa: Insecure.RSA.PrivateKey)
        async throws -> String
    {
        let input =
            base64URL(Data(header.serialized().utf8)) + "."
            + base64URL(try JSONEncoder().encode(claims))
        let signer = JWTKeyCollection()
        await signer.add(rsa: rsa, digestAlgorithm: .sha256)
        let signature = try await signer.sign(claims).split(separator: ".")[2]
        return input + "." + signature
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A throwaway RSA key for these tests only.
    static let rsaPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQD3coVbovObGBxM
        C5C8cxJ1p4xzWbf4e/maR7xZq+jzjixiT7fO1eYWRe3MSc0g2WIzk+TcIgmzvbjR
        aSlaPSYVxXL5a5+hNO23hYBzSuKqwTowkqdd3olHSSWrb3C4jexVYDOlGyyAJSNq
        9Nb5W1fxmYBlSRmaYhRrHtrVX3aCvMf7IyTSsuPcLpfcV+N59eFOVcgX15Las3zt
        oSAJMIIGBtVfKn32zza7Al4NpoVlIXDLRU/A05ccsK1BUlIRUIiiQq7cWQXCNZXF
        BEeGZGaU0K1GcKdRlZRvwhO/3WgmcRdGzPwZbQVDd7DN3NXYPo77YMORR2tkA2d5
        9JsscIzjAgMBAAECggEAIMd+m7Vfbfk+A7jjKIOvO1TBtKTQS84oh46J3fB5qzdM
        m+K8PQh1iBfQDj2XOzXGM4JGUVRU/Vwxon660qXCaM8/kYOh9toAb6JIx30bv8uv
        E1t/aQj0yIkLwMUXepXvwR49roPbW50P2bhWI1w9WdegJvVjEIzTmvPQa276T7Zt
        sfMev5fHiM3551/S1oljLh2s+eDbh8R9LYlzMXirDLKpuXVfV4YbsLho/B+EjQyB
        K5BlGvfAAdqQNIPkmaeAte71SHCNVcDw/GbV7NYngd5Q5FZVRnCIGUPiL0YxVVNH
        Fk8oVpIpaSUerXiD8xbKp/jspBlIMh8MqX+EfubgKQKBgQD8N2CcKylOiJhOhDaw
        Zu9RI+4L+mEE+ACHPsmukjVjduQqJgGdT21uI+gKN1o9UlmCXHyzbvodjEV8INVF
        VW57SOQQwJiYn1Gui9X60qyLi2tale9nVY8k86pTrYUwzlCyIbmDf/SKKmq6kRu3
        bdfUUmW3Pod8nZs8qJQyvBDy5QKBgQD7KNQeAcNifhzOkWR5RfQfSGNqyEJZdUfN
        0zXmP0N8XhOqvPIqI7ocmt/QP5y7m6j0CwziPk25kEOoSIUJlRCQDdKf5Tl1jQRl
        bePVkBXP48jtw6U56C0MUxOHt27991Iq482nv4Emk+3CcycpktOLleAWn52rYmXi
        KhRNFPicJwKBgFxQHIEsXwMKhcx/IdEw67jkELW7n5UE/JSDy6ekhfvwwRQYMxET
        yDa+16gdmF7HbFGFbnLyVINKGwiSr9yfpz9ib28ePvvlnCzpq5kRUOwGTHWsWSKW
        Mz1QHfBgm1ZAvVJle5QA2k1TtxqwD9f0UUG6ItaOAWMAAJiUDyH+qaltAoGBALIm
        Vb8rFQIJ3jkPnCsBWZXO7OXTQmzd6Z6vUC4PdbkDqgOTnloRmXOsz1CRroTMdt0T
        8YGRG+Sh1bvKJMOVPnhPtbTBDS66ZgHkHpVfbHlXYzBzdAFNFJcHXnUHwezWvyu5
        BikUh3FrwFwK/h5ZDUCXgKnLcjUcyJPRsTCzzVxFAoGALkaSVUI2PQLaWNPOZJ4+
        2X2ZBG5HxeI+X4tHXgQ2sKC0Y/w0wfGFsBu8zx27roq3ZtwOyNw1Yn8Cd5x2ptaA
        9i9tGaMW1dRo0xVJSr5zEFZWdl2s52ImFalLVxB1jYMRatcHjfLmZo55Z64nw2qD
        SBgVZVAF7idI6EUVAdGui4Y=
        -----END PRIVATE KEY-----
        """
}
