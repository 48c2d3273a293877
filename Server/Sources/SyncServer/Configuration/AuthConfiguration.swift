public import Foundation

/// How the server checks who calls it: JSON Web Tokens signed with a shared secret (HS256) or with
/// the keys an identity provider publishes (RS256, ES256 from a JWKS file). With it set, every table
/// requires a valid token unless the table's ``TableConfiguration/access`` says otherwise.
///
/// For example, in the configuration file:
/// ```json
/// {"auth": {"hs256Secret": "…", "issuer": "https://id.example.com/", "audience": "todo-app"},
///  "tables": [{"name": "TodoItem", "perUser": true}]}
/// ```
public struct AuthConfiguration: Sendable, Hashable {
    /// The shared secret of HS256 tokens (at least 32 bytes), or nil to accept none. The server also reads it
    /// from `SYNC_AUTH_HS256_SECRET`.
    public var hs256Secret: String?
    /// A JSON Web Key Set file (`{"keys": [...]}`) of RSA (RS256) and P-256 (ES256) public keys, or nil.
    public var jwksFile: String?
    /// The `iss` a token must carry, or nil to accept any.
    public var issuer: String?
    /// The `aud` a token must carry (one of its audiences), or nil to accept any.
    public var audience: String?
    /// How far the server's clock and the issuer's may disagree when `exp` and `nbf` are checked. Default 60 s.
    public var clockSkew = Duration.seconds(60)
    /// Who may read `GET /metrics`. Default: anyone.
    public var metrics = Access.anonymous
    /// Who may read `GET /openapi.yaml`. Default: anyone.
    public var openAPI = Access.anonymous
    /// The administrators who may use the web console (`/console`), which reads every table across users:
    /// ``Access/restricted(subjects:roles:)`` or ``Access/disabled`` (anyone else would read every user's rows).
    /// Default: callers whose `roles` claim holds `admin`.
    public var console = Access.restricted(subjects: [], roles: ["admin"])

    /// A configuration that accepts HS256 tokens signed with `hs256Secret`.
    ///
    /// - Parameter hs256Secret: The shared secret, or nil (then set ``jwksFile``).
    public init(hs256Secret: String? = nil) {
        self.hs256Secret = hs256Secret
    }

    /// The name of the environment variable that holds the HS256 secret.
    public static let secretVariable = "SYNC_AUTH_HS256_SECRET"

    /// Checks that tokens can be verified at all.
    ///
    /// - Throws: ``ConfigurationError`` when neither a secret nor a key file is set, or the secret is short.
    func validate() throws {
        guard hs256Secret != nil || jwksFile != nil else {
            throw ConfigurationError(
                "auth: set hs256Secret (or \(Self.secretVariable)) or jwksFile, or tokens cannot be checked")
        }
        if let hs256Secret, hs256Secret.utf8.count < 32 {
            throw ConfigurationError("auth: hs256Secret must be at least 32 bytes (RFC 7518 §3.2)")
        }
        guard clockSkew >= .zero, clockSkew <= .seconds(600) else {
            throw ConfigurationError("auth: clockSkewSeconds is 0 to 600")
        }
        switch console {
        case .restricted, .disabled: break
        case .anonymous, .authenticated:
            throw ConfigurationError(
                "auth.console: the console reads every user's rows; name its administrators "
                    + "({\"subjects\": [...], \"roles\": [...]}) or disable it")
        }
    }
}

/// Who may do something: anyone, any signed-in user, certain users, or no one.
public enum Access: Sendable, Hashable {
    /// Anyone, with or without a token (a token that is sent must still be valid).
    case anonymous
    /// Any caller with a valid token.
    case authenticated
    /// Callers with a valid token whose `sub` is one of `subjects` or whose `roles` claim holds one of `roles`;
    /// other signed-in callers are refused with 403.
    case restricted(subjects: Set<String>, roles: Set<String>)
    /// No one: the operation is answered 405.
    case disabled

    /// Whether a caller is needed.
    var needsCaller: Bool {
        switch self {
        case .authenticated, .restricted: true
        case .anonymous, .disabled: false
        }
    }
}

/// The operations a table's access is given for: `read` covers reads, queries and page counts; `update` covers
/// undeletes (`POST /tables/{name}/{id}`) too.
public enum TableOperation: String, Sendable, Hashable, CaseIterable {
    /// `GET` of an item or a query.
    case read
    /// `POST` of a new item.
    case insert
    /// `PATCH` of an item, and undelete.
    case update
    /// `DELETE` of an item.
    case delete
}

/// Cross-origin requests from web pages (CORS). Off unless configured.
///
/// For example: `"cors": {"allowedOrigins": ["https://app.example.com"]}`.
public struct CORSConfiguration: Sendable, Hashable {
    /// The origins whose pages may call the server (`https://app.example.com`), or `["*"]` for any.
    public var allowedOrigins: [String]
    /// How long a browser may keep a preflight's answer. Default 600 s.
    public var maxAge = Duration.seconds(600)

    /// Allows the given origins.
    ///
    /// - Parameter allowedOrigins: Origins as browsers send them (scheme, host, port), or `"*"`.
    public init(allowedOrigins: [String]) {
        self.allowedOrigins = allowedOrigins
    }

    /// Checks each origin.
    ///
    /// - Throws: ``ConfigurationError`` for an empty list or an origin that is not `scheme://host[:port]`.
    func validate() throws {
        guard !allowedOrigins.isEmpty else { throw ConfigurationError("cors: allowedOrigins must name an origin") }
        for origin in allowedOrigins where origin != "*" {
            guard let url = URLComponents(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme),
                url.host?.isEmpty == false, url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil
            else {
                throw ConfigurationError(
                    "cors: '\(origin)' is not an origin: write scheme://host[:port], as in https://app.example.com")
            }
        }
    }
}
