import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// The links an answer carries — an item's URL (`Location`) and a page's next link — from a request's origin and
/// path, whose headers are checked before they reach a link (``origin(forwardedProto:authority:)``).
struct LinkBuilder: Sendable {
    /// `http://host`, or `https://host` behind a proxy that says so.
    let origin: String
    /// The request's path (`/tables/TodoItem`).
    let path: String
    /// The `ZUMO-API-VERSION` query parameter the request carried, if any (a next link keeps it).
    let versionParameter: String?

    init(origin: String, path: String, versionParameter: String? = nil) {
        self.origin = origin
        self.path = path
        self.versionParameter = versionParameter
    }

    init(_ request: Request) {
        origin = Self.origin(
            forwardedProto: request.headers[HTTPField.Name("X-Forwarded-Proto")!],
            authority: request.head.authority ?? request.headers[HTTPField.Name("Host")!])
        path = request.uri.path
        versionParameter = APIVersionMiddleware.queryVersion(request.uri.query ?? "")
    }

    /// The request's own URL, without its query.
    var url: String { origin + path }

    /// The URL of the item `id` under the request's table URL, whose stored row is `item`: its id as the row shows it
    /// (a number, in a table of integer ids).
    func itemURL(id: ItemID, item: JSONValue) -> String {
        let shown = item[SystemProperty.id.rawValue]?.intValue.map { String($0) } ?? id.rawValue
        return url + "/" + ODataQuery.percentEncode(shown)
    }

    /// The next page's URL, built from the parsed query (so an option written `%24top` is not kept beside the new
    /// `$top`): `$skip` advanced and `$top` reduced by `returned`; a `ZUMO-API-VERSION` parameter is kept, other
    /// parameters are not.
    func nextLink(_ query: ODataQuery, returned: Int) -> String {
        var link = url + "?" + Self.following(query, returned: returned).queryString
        if let version = versionParameter {
            link += "&ZUMO-API-VERSION=" + ODataQuery.percentEncode(ODataQuery.percentDecode(version) ?? version)
        }
        return link
    }

    /// The query of the page after one of `returned` rows: `$skip` advanced, `$top` reduced.
    static func following(_ query: ODataQuery, returned: Int) -> ODataQuery {
        var next = query
        next.skip = (query.skip ?? 0) + returned
        next.top = query.top.map { $0 - returned }
        return next
    }

    /// Whether a page of `page.itemCount` rows has a next one: more rows match, and `$top` has rows left.
    static func hasNext(_ query: ODataQuery, _ page: QueryPage) -> Bool {
        page.hasMore && (query.top.map { $0 > page.itemCount } ?? true)
    }

    /// The origin for links to this server: the `X-Forwarded-Proto` scheme only when it is `http` or `https`, and
    /// the request's host only when it is a host name, an IPv4 or a bracketed IPv6 address with an optional port —
    /// else `http` and `localhost`, so that a header cannot turn a link into `javascript:` or inject text.
    static func origin(forwardedProto: String?, authority: String?) -> String {
        let scheme = forwardedProto.map { $0.lowercased() }.flatMap { ["http", "https"].contains($0) ? $0 : nil }
        let host = authority.flatMap { isPlainAuthority($0) ? $0 : nil }
        return "\(scheme ?? "http")://\(host ?? "localhost")"
    }

    /// Whether `text` is `host[:port]` with a host of letters, digits, `-` and `.`, or `[IPv6]`.
    static func isPlainAuthority(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 255 else { return false }
        let isPort = { (port: Substring) in !port.isEmpty && port.count <= 5 && port.allSatisfy(\.isASCIIDigitCharacter)
        }
        var host = Substring(text)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let address = host[host.index(after: host.startIndex)..<close]
            let rest = host[host.index(after: close)...]
            return !address.isEmpty && address.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
                && (rest.isEmpty || (rest.first == ":" && isPort(rest.dropFirst())))
        }
        if let colon = host.lastIndex(of: ":") {
            guard isPort(host[host.index(after: colon)...]) else { return false }
            host = host[..<colon]
        }
        return !host.isEmpty && host.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }
}
