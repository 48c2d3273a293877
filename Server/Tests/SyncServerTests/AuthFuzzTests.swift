import Foundation
import HTTPTypes
import HummingbirdTesting
import PropertyBased
import SyncCore
import Testing

@testable import SyncServer

/// Fuzzes the token headers of a live server (HTTP on loopback, SQLite, a per-user `TodoItem` holding one row of
/// alice's and one of bob's). Each request carries a token made from a valid one of alice's — a character
/// changed, removed or added; a part dropped, swapped or repeated; the header or the claims replaced by odd JSON
/// (other algorithms, `none`, a `kid` of nothing, claims of the wrong type, long or control-laden subjects);
/// random text — in `Authorization` (any scheme, case and spacing), `X-ZUMO-AUTH`, or both.
///
/// Property: never a 5xx; a 401 carries the challenge and never the token; a 200 only lists alice's row.
/// Fixed seeds run in CI; a failing seed found later joins them.
@Suite(.timeLimit(.minutes(3))) struct AuthFuzzTests {
    static let seeds: [UInt64] = [1, 2, 3]
    static let requestsPerSeed = 400

    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ %\"'{}:,")

    static func encoded(_ value: JSONValue) -> String {
        AuthTests.base64URL(Data(value.serialized().utf8))
    }

    static let headers: [JSONValue] = [
        ["alg": "none"], ["alg": "HS256"], ["alg": "hs256", "typ": "JWT"], ["alg": "HS512"], ["alg": "RS256"],
        ["alg": "ES256", "kid": ""], ["alg": "RS256", "kid": "../../etc/passwd"], ["alg": 256], ["kid": "x"], [:],
        "HS256", ["alg": ["HS256"]],
    ]
    static let claims: [JSONValue] = [
        ["sub": "bob", "exp": 4_000_000_000], ["sub": 42, "exp": 4_000_000_000], ["sub": "alice", "exp": "tomorrow"],
        ["sub": "alice", "exp": 1e300], ["sub": "alice", "exp": -1], ["exp": 4_000_000_000],
        ["sub": .string(String(repeating: "a", count: 300)), "exp": 4_000_000_000],
        ["sub": "ali\u{0}ce", "exp": 4_000_000_000], ["sub": "alice", "exp": 4_000_000_000, "roles": 7],
        ["sub": "alice", "aud": [1, 2], "exp": 4_000_000_000], [], "alice",
    ]

    /// A token made from `valid` by one random change.
    static func mutated(_ valid: String, _ random: inout Xoshiro) -> String {
        var characters = Array(valid)
        var parts = valid.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        switch Int.random(in: 0..<9, using: &random) {
        case 0:
            characters[Int.random(in: 0..<characters.count, using: &random)] = alphabet.randomElement(using: &random)!
            return String(characters)
        case 1:
            characters.remove(at: Int.random(in: 0..<characters.count, using: &random))
            return String(characters)
        case 2:
            characters.insert(
                alphabet.randomElement(using: &random)!, at: Int.random(in: 0...characters.count, using: &random))
            return String(characters)
        case 3:
            parts.remove(at: Int.random(in: 0..<parts.count, using: &random))
            return parts.joined(separator: ".")
        case 4:
            parts.swapAt(Int.random(in: 0..<3, using: &random), Int.random(in: 0..<3, using: &random))
            parts.append(parts[Int.random(in: 0..<3, using: &random)])
            return parts.prefix(Int.random(in: 2...4, using: &random)).joined(separator: ".")
        case 5:
            parts[0] = encoded(headers.randomElement(using: &random)!)
            return parts.joined(separator: ".")
        case 6:
            parts[1] = encoded(claims.randomElement(using: &random)!)
            return parts.joined(separator: ".")
        case 7:
            parts[2] = Bool.random(using: &random) ? "" : String(parts[2].reversed())
            return parts.joined(separator: ".")
        default:
            let length = Int.random(in: 0..<200, using: &random)
            return String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
        }
    }

    /// Where a token goes: one of the two headers, both, or an odd `Authorization`.
    static func placed(_ token: String, _ random: inout Xoshiro) -> HTTPFields {
        switch Int.random(in: 0..<7, using: &random) {
        case 0: [.authorization: "Bearer \(token)"]
        case 1: [.authorization: "bearer   \(token)"]
        case 2: [AuthenticationMiddleware.zumoAuth: token]
        case 3: [.authorization: "Bearer \(token)", AuthenticationMiddleware.zumoAuth: token]
        case 4: [.authorization: "Bearer \(token)", AuthenticationMiddleware.zumoAuth: "x\(token)"]
        case 5: [.authorization: "Basic \(token)"]
        default: [.authorization: "Bearer\(token)"]
        }
    }

    @Test(arguments: seeds)
    func mutatedTokensAreRefusedOrProveTheSameUser(seed: UInt64) async throws {
        let alice = try await AuthTests.token("alice")
        let bob = try await AuthTests.token("bob")
        try await AuthTests.withServer(.sqlite, setup: .live) { client in
            #expect(
                try await client.send(.post, "/tables/TodoItem", json: ["id": "a1"], headers: AuthTests.bearer(alice))
                    .status == .created)
            #expect(
                try await client.send(.post, "/tables/TodoItem", json: ["id": "b1"], headers: AuthTests.bearer(bob))
                    .status == .created)
            var random = Xoshiro(seed: (seed, 0x5EED, 0, 1))
            var statuses: [Int: Int] = [:]
            for _ in 0..<Self.requestsPerSeed {
                let token = Self.mutated(alice, &random)
                let reply = try await client.send(.get, "/tables/TodoItem", headers: Self.placed(token, &random))
                statuses[reply.status.code, default: 0] += 1
                switch reply.status {
                case .ok:
                    #expect(reply.ids == ["a1"], "seed \(seed): token \(token)")
                case .unauthorized:
                    #expect(reply["WWW-Authenticate"]?.hasPrefix("Bearer") == true)
                    #expect(token.count < 16 || !reply.text.contains(token), "seed \(seed): the body echoes the token")
                default:
                    Issue.record("seed \(seed): status \(reply.status.code) for token \(token)")
                }
            }
            print("AuthFuzzTests seed \(seed): statuses \(statuses.sorted { $0.key < $1.key })")
        }
    }
}
