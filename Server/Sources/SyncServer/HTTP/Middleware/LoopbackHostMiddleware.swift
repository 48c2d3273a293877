import HTTPTypes
import Hummingbird

/// On a server without auth that listens on a loopback address, answers 403 to a request whose `Host` is not a
/// loopback name (`localhost`, `127.x.x.x`, `[::1]`, with any port): a web page on another site can point its own
/// name at 127.0.0.1 (DNS rebinding) and reach a loopback server from the user's browser, where nothing else —
/// no token — stands between it and every table and the console. A request without `Host` (HTTP/1.0; no browser
/// sends one) passes.
struct LoopbackHostMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if let authority = request.head.authority, !Self.isLoopback(authority: authority) {
            throw APIError(
                .forbidden,
                "This server has no auth and answers only requests for localhost, 127.0.0.1 or [::1] (Host header)",
                reason: .hostForbidden)
        }
        return try await next(request, context)
    }

    /// Whether `authority` (`host[:port]`) names a loopback host, compared as ASCII bytes.
    static func isLoopback(authority: String) -> Bool {
        var host = Substring(authority)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && isPort(rest.dropFirst())) else { return false }
            return host[host.index(after: host.startIndex)..<close] == "::1"
        }
        if let colon = host.lastIndex(of: ":") {
            guard isPort(host[host.index(after: colon)...]) else { return false }
            host = host[..<colon]
        }
        if host.lowercased() == "localhost" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127"
            && octets.allSatisfy { octet in
                !octet.isEmpty && octet.utf8.count <= 3 && isDigits(octet) && (Int(octet) ?? 256) < 256
            }
    }

    private static func isPort(_ text: Substring) -> Bool { !text.isEmpty && text.utf8.count <= 5 && isDigits(text) }

    private static func isDigits(_ text: Substring) -> Bool {
        text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}
