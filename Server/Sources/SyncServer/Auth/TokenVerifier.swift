public import Foundation
import JWTKit
public import SyncCore

/// Who called, as a verified token says.
public struct Caller: Sendable, Hashable {
    /// The token's `sub`: the user's id, and the owner of the rows they insert into per-user tables.
    public var subject: String
    /// The token's `roles` claim (a list of strings, or one string), empty when absent.
    public var roles: Set<String>
    /// Every claim of the verified token, as its payload has them (`sub`, `roles`, `exp`, and those of the identity
    /// provider or the app, such as `email` or `team`), for hooks and custom APIs.
    public var claims: [String: JSONValue] = [:]

    /// Whether this caller may do what `access` allows: anyone for ``Access/anonymous`` and
    /// ``Access/authenticated``, the listed subjects and roles for ``Access/restricted(subjects:roles:)``.
    func isAllowed(_ access: Access) -> Bool {
        switch access {
        case .anonymous, .authenticated: true
        case .restricted(let subjects, let roles): subjects.contains(subject) || !roles.isDisjoint(with: self.roles)
        case .disabled: false
        }
    }
}

/// Why a token was refused: a 401 whose one-line reason never repeats the token.
struct TokenRefusal: Error, Equatable {
    /// The `sync_refusals` reason: one of the `token…` cases.
    let reason: RefusalReason
    /// What is wrong, for the body and the `WWW-Authenticate` header.
    let message: String

    static let missing = TokenRefusal(
        reason: .tokenMissing, message: "sign in: send the user's token as Authorization: Bearer <token>")
    static func malformed(_ detail: String) -> TokenRefusal {
        TokenRefusal(reason: .tokenMalformed, message: "the token is not a JSON Web Token: \(detail)")
    }
}

/// Checks JSON Web Tokens: the signature with a key of the token's own algorithm (HS256 with the shared secret,
/// RS256 and ES256 with the JWKS keys of that type — so an algorithm never picks a key of another kind, and
/// `none` is refused), then `exp` (required), `nbf`, `iss` and `aud`, with the configured clock skew.
/// Signatures are checked by `JWTKit`.
final class TokenVerifier: Sendable {
    /// A public key of the JWKS file, ready to verify with.
    private struct PublicKey: Sendable {
        let id: String?
        let algorithm: String
        let keys: JWTKeyCollection
    }

    private let hmac: JWTKeyCollection?
    private let publicKeys: [PublicKey]
    private let issuer: String?
    private let audience: String?
    private let clockSkew: TimeInterval
    private let now: @Sendable () -> Date

    /// The longest `sub` accepted; it is stored in each row of a per-user table.
    static let maximumSubjectLength = 255

    /// Prepares the keys of `configuration`.
    ///
    /// - Throws: ``ConfigurationError`` when the JWKS file cannot be read or holds a key that is neither RSA nor
    ///   P-256.
    init(_ configuration: AuthConfiguration, now: @escaping @Sendable () -> Date) async throws {
        if let secret = configuration.hs256Secret {
            hmac = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        } else {
            hmac = nil
        }
        var publicKeys: [PublicKey] = []
        if let path = configuration.jwksFile {
            let set: JWKS
            do {
                set = try JSONDecoder().decode(JWKS.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw ConfigurationError("auth.jwksFile \(path): not a readable JSON Web Key Set (\(error))")
            }
            for (index, key) in set.keys.enumerated() {
                let label = "auth.jwksFile \(path), key \(key.keyIdentifier?.string ?? "without kid")"
                let algorithm: String
                switch (key.keyType, key.curve) {
                case (.rsa, _): algorithm = "RS256"
                case (.ecdsa, .ecdsa(.p256)?): algorithm = "ES256"
                default: throw ConfigurationError("\(label): only RSA (RS256) and P-256 (ES256) keys are supported")
                }
                if let declared = key.algorithm, declared.rawValue != algorithm {
                    throw ConfigurationError("\(label): alg \(declared.rawValue) is not supported; use \(algorithm)")
                }
                var usable = key
                usable.keyIdentifier = usable.keyIdentifier ?? JWKIdentifier(string: "key-\(index)")
                usable.algorithm = JWK.Algorithm(rawValue: algorithm)
                let keys = JWTKeyCollection()  // this key alone, as the default: every token is checked with it
                do { try await keys.add(jwk: usable, isDefault: true) } catch {
                    throw ConfigurationError("\(label): \(error)")
                }
                publicKeys.append(PublicKey(id: key.keyIdentifier?.string, algorithm: algorithm, keys: keys))
            }
            if publicKeys.isEmpty { throw ConfigurationError("auth.jwksFile \(path): the set holds no keys") }
        }
        self.publicKeys = publicKeys
        issuer = configuration.issuer
        audience = configuration.audience
        clockSkew = Double(configuration.clockSkew.components.seconds)
        self.now = now
    }

    /// The caller a token proves, or why not.
    ///
    /// - Parameter token: The compact JWT (`header.payload.signature`).
    /// - Returns: The caller.
    /// - Throws: ``TokenRefusal``.
    func verify(_ token: String) async throws(TokenRefusal) -> Caller {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URLDecoded(parts[0]),
            // Read as client text (ASCII names, stream-safe strings) before JWTKit reads it: its parse comes before
            // the signature's check, and hashing a name of combining marks costs time quadratic in its length.
            case .object(let header)? = try? headerBytes.withUnsafeBytes({ raw in
                try JSONValue(parsingUTF8: raw.bindMemory(to: UInt8.self), limits: .clientText)
            })
        else { throw .malformed("three base64url parts, the first a JSON object") }
        guard let algorithm = header["alg"]?.stringValue else { throw .malformed("its header has no alg") }
        let keyID = header["kid"]?.stringValue
        let candidates: [JWTKeyCollection]
        switch algorithm {
        case "HS256":
            candidates = hmac.map { [$0] } ?? []
        case "RS256", "ES256":
            candidates = publicKeys.filter { $0.algorithm == algorithm && (keyID == nil || $0.id == keyID) }.map(\.keys)
        default:
            throw TokenRefusal(
                reason: .tokenAlgorithm, message: "the token's algorithm is not accepted: use HS256, RS256 or ES256")
        }
        guard !candidates.isEmpty else {
            throw TokenRefusal(reason: .tokenAlgorithm, message: "no key of this server verifies \(algorithm) tokens")
        }
        var claims: Claims?
        var failure = TokenRefusal(reason: .tokenSignature, message: "the token's signature does not verify")
        for keys in candidates where claims == nil {
            do {
                claims = try await keys.verify(token, as: Claims.self)
            } catch let error as JWTError where error.errorType != .signatureVerificationFailed {
                failure = .malformed("its claims cannot be read")
            } catch {}
        }
        guard let claims else { throw failure }
        var caller = try check(claims)
        // The payload verified with the signature; read again as JSON so that no claim is lost to the `Claims` type.
        if let payload = Self.base64URLDecoded(parts[1]), case .object(let all)? = try? JSONValue(parsing: payload) {
            caller.claims = all
        }
        return caller
    }

    /// The bytes of a base64url text without padding (RFC 7515 §2), or nil.
    static func base64URLDecoded(_ text: Substring) -> Data? {
        guard text.utf8.allSatisfy({ $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "/") })
        else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    /// Checks the claims of a token whose signature verified.
    private func check(_ claims: Claims) throws(TokenRefusal) -> Caller {
        let now = self.now()
        guard let expiry = claims.exp?.value else {
            throw TokenRefusal(reason: .tokenExpired, message: "the token has no expiry (exp)")
        }
        guard now.timeIntervalSince(expiry) <= clockSkew else {
            throw TokenRefusal(reason: .tokenExpired, message: "the token has expired: sign in again")
        }
        if let notBefore = claims.nbf?.value, notBefore.timeIntervalSince(now) > clockSkew {
            throw TokenRefusal(reason: .tokenNotYetValid, message: "the token is not valid yet (nbf)")
        }
        if let issuer, claims.iss?.value != issuer {
            throw TokenRefusal(reason: .tokenIssuer, message: "the token is from another issuer")
        }
        if let audience, !(claims.aud?.value.contains(audience) ?? false) {
            throw TokenRefusal(reason: .tokenAudience, message: "the token is for another audience")
        }
        guard let subject = claims.sub?.value, !subject.isEmpty, subject.utf8.count <= Self.maximumSubjectLength,
            !subject.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw TokenRefusal(
                reason: .tokenSubject,
                message: "the token needs a sub of 1 to \(Self.maximumSubjectLength) bytes without control characters")
        }
        return Caller(subject: subject, roles: claims.roles)
    }
}

/// The claims the server reads. Their values are checked by ``TokenVerifier``, with its clock and skew.
struct Claims: JWTPayload {
    var sub: SubjectClaim?
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    var roles: Set<String>

    enum CodingKeys: String, CodingKey {
        case sub, exp, nbf, iss, aud, roles
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sub = try container.decodeIfPresent(SubjectClaim.self, forKey: .sub)
        exp = try container.decodeIfPresent(ExpirationClaim.self, forKey: .exp)
        nbf = try container.decodeIfPresent(NotBeforeClaim.self, forKey: .nbf)
        iss = try container.decodeIfPresent(IssuerClaim.self, forKey: .iss)
        aud = try container.decodeIfPresent(AudienceClaim.self, forKey: .aud)
        if let list = try? container.decodeIfPresent([String].self, forKey: .roles) {
            roles = Set(list)
        } else if let one = try? container.decodeIfPresent(String.self, forKey: .roles) {
            roles = [one]
        } else {
            roles = []
        }
    }

    /// More claims, written after the others (``makeHS256Token(subject:secret:lifetime:issuer:audience:roles:claims:now:)``).
    var extra: [String: JSONValue] = [:]

    init(subject: String, expiry: Date, issuer: String?, audience: String?, roles: Set<String>) {
        sub = SubjectClaim(value: subject)
        exp = ExpirationClaim(value: expiry)
        iss = issuer.map { IssuerClaim(value: $0) }
        aud = audience.map { AudienceClaim(value: [$0]) }
        self.roles = roles
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(sub, forKey: .sub)
        try container.encodeIfPresent(exp, forKey: .exp)
        try container.encodeIfPresent(nbf, forKey: .nbf)
        try container.encodeIfPresent(iss, forKey: .iss)
        try container.encodeIfPresent(aud, forKey: .aud)
        if !roles.isEmpty { try container.encode(roles.sorted(), forKey: .roles) }
        var more = encoder.container(keyedBy: ClaimName.self)
        for (name, value) in extra { try more.encode(value, forKey: ClaimName(name)) }
    }

    /// The name of a claim not among ``CodingKeys``.
    struct ClaimName: CodingKey {
        let stringValue: String
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.init(stringValue) }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Makes an HS256 token for development and tests (`sync-server token`): what an identity provider would issue.
///
/// - Parameters:
///   - subject: The user's id (`sub`).
///   - secret: The server's `hs256Secret`.
///   - lifetime: How long the token is valid from now. Default one hour.
///   - issuer: The `iss`, if the server checks one.
///   - audience: The `aud`, if the server checks one.
///   - roles: The `roles` claim.
///   - claims: More claims, such as `["tenant": "acme"]`, for hooks and scopes that read them (``Caller/claims``).
///   - now: The time the lifetime counts from.
/// - Returns: The compact token.
/// - Throws: ``ConfigurationError`` when `claims` names one the other parameters set (`sub`, `exp`, `nbf`, `iss`,
///   `aud`, `roles`); an error from `JWTKit` when the token cannot be signed.
public func makeHS256Token(
    subject: String, secret: String, lifetime: Duration = .seconds(3600), issuer: String? = nil,
    audience: String? = nil, roles: Set<String> = [], claims: [String: JSONValue] = [:], now: Date = Date()
) async throws -> String {
    if let taken = claims.keys.sorted().first(where: { Claims.CodingKeys(rawValue: $0) != nil }) {
        throw ConfigurationError("claims: '\(taken)' is set by its own parameter")
    }
    let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
    let expiry = now.addingTimeInterval(Double(lifetime.components.seconds))
    var payload = Claims(subject: subject, expiry: expiry, issuer: issuer, audience: audience, roles: roles)
    payload.extra = claims
    return try await keys.sign(payload)
}
