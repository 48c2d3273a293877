import Foundation
import HTTPTypes
import Hummingbird

/// Reads the caller's token from `Authorization: Bearer <jwt>` or `X-ZUMO-AUTH: <jwt>` (the original SDKs'
/// header) and puts the caller it proves in the context. A request without a token goes on anonymous, and
/// the routes decide (``Access``); a token that does not verify is a 401 wherever it is sent, so that a
/// client learns at once that it must sign in again. `/health` and `/ready` are left alone (a balancer's checks).
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let verifier: TokenVerifier

    static let zumoAuth = HTTPField.Name("X-ZUMO-AUTH")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard request.uri.path != "/health", request.uri.path != "/ready" else {
            return try await next(request, context)
        }
        var context = context
        do {
            if let token = try Self.token(request.headers) { context.caller = try await verifier.verify(token) }
        } catch let refusal as TokenRefusal {
            throw APIError.unauthorized(refusal)
        }
        return try await next(request, context)
    }

    /// The token a request carries, nil for none.
    ///
    /// - Throws: ``TokenRefusal`` for an `Authorization` header of another scheme, or two different tokens.
    static func token(_ headers: HTTPFields) throws(TokenRefusal) -> String? {
        // A token is base64url text: decided on its bytes before any `String` splits or compares it (a value of
        // combining marks costs time quadratic in its length there).
        for value in [headers[.authorization], headers[zumoAuth]]
        where value?.utf8.contains(where: { $0 >= 0x80 }) == true {
            throw .malformed("a token is ASCII: three base64url parts")
        }
        var bearer: String?
        if let authorization = headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                throw .malformed("send it as Authorization: Bearer <token>")
            }
            bearer = parts[1].trimmingCharacters(in: .whitespaces)
        }
        let zumo = headers[zumoAuth]?.trimmingCharacters(in: .whitespaces)
        if let bearer, let zumo, bearer != zumo {
            throw .malformed("Authorization and X-ZUMO-AUTH carry different tokens")
        }
        return bearer ?? zumo
    }
}

/// Checks an ``Access`` against the caller: 401 when a caller is needed and missing, 403 when this caller is
/// not one of those allowed, 405 when the operation is disabled.
enum Authorization {
    /// - Parameters:
    ///   - access: Who may.
    ///   - caller: Who asks.
    ///   - what: The operation, for messages ("reading TodoItem").
    ///   - allowed: The methods the path still takes, for the 405's `Allow` header.
    /// - Throws: ``APIError``.
    static func check(_ access: Access, caller: Caller?, what: String, allowed: [HTTPRequest.Method] = [])
        throws(APIError)
    {
        switch access {
        case .anonymous:
            return
        case .disabled:
            var refusal = APIError(.methodNotAllowed, "\(what) is disabled on this server", reason: .accessDisabled)
            refusal.headers[.allow] = MethodNotAllowedMiddleware.list(allowed)
            throw refusal
        case .authenticated, .restricted:
            guard let caller else { throw APIError.unauthorized(.missing) }
            guard caller.isAllowed(access) else {
                throw APIError(.forbidden, "\(what) is not allowed to this user", reason: .forbidden)
            }
        }
    }
}

extension APIError {
    /// A 401 with a `WWW-Authenticate: Bearer` challenge (RFC 6750 §3) and the refusal's one-line reason.
    static func unauthorized(_ refusal: TokenRefusal) -> APIError {
        var error = APIError(.unauthorized, "Unauthorized: \(refusal.message)", reason: refusal.reason)
        error.headers[.wwwAuthenticate] =
            refusal == .missing
            ? #"Bearer realm="sync-server""#
            : #"Bearer realm="sync-server", error="invalid_token", error_description="\#(refusal.message)""#
        return error
    }
}
