import Foundation
import Logging
import SyncCore
import SyncOData
import SyncSQLite

/// Supplies the user's token; `refresh` is true after the server answered 401 to the last one. A JWT's `sub` claim
/// names the account whose data the store holds: a token for another account is refused before it is sent
/// (<doc:SeveralPeopleOneDevice>).
public typealias TokenProvider = @Sendable (_ refresh: Bool) async throws -> String?

/// Sends the table API's requests with the protocol's headers (PROTOCOL.md §2), asking the token
/// provider again once after a 401.
struct TableEndpoint: Sendable {
    let baseURL: URL
    let transport: any HTTPTransport
    /// The installation id and the account's checked token.
    let credentials: Credentials
    let timeout: Duration
    let logger: Logger
    /// The dialect of every request and answer.
    let wire: any WireDialect
    /// The batch endpoint the server offers (learned from its responses).
    let batchOffer: BatchOffer

    static let userAgent = "OfflineSync/1.0 (lang=Swift; os=\(osName))"
    #if os(Linux)
        static let osName = "Linux"
    #elseif os(iOS)
        static let osName = "iOS"
    #elseif os(macOS)
        static let osName = "macOS"
    #else
        static let osName = "other"
    #endif

    /// The URL of a table, or of one of its items, with a query string.
    func url(_ table: TableName, id: ItemID? = nil, query: String? = nil) -> URL {
        var text = baseURL.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        text += "/tables/" + table.rawValue
        if let id { text += "/" + ODataQuery.percentEncode(id.rawValue) }
        if let query, !query.isEmpty { text += "?" + query }
        return URL(string: text) ?? baseURL
    }

    /// The URL of a file attached to `table`'s rows (docs/attachments.md).
    func attachmentURL(_ table: TableName, hash: String) -> URL {
        url(table).appendingPathComponent("attachments").appendingPathComponent(hash)
    }

    /// `tables/NAME[/ID]`: the path of a table or item relative to the base URL (for a batch's operations).
    func path(_ table: TableName, id: ItemID? = nil) -> String {
        "tables/" + table.rawValue + (id.map { "/" + ODataQuery.percentEncode($0.rawValue) } ?? "")
    }

    /// The URL of a custom API, `api/NAME`, with its query parameters (in name order).
    func apiURL(_ name: String, parameters: [String: String]) -> URL {
        var text = baseURL.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        text += "/api/" + name
        let pairs = parameters.sorted { $0.key < $1.key }.map {
            ODataQuery.percentEncode($0.key) + "=" + ODataQuery.percentEncode($0.value)
        }
        if !pairs.isEmpty { text += "?" + pairs.joined(separator: "&") }
        return URL(string: text) ?? baseURL
    }

    /// Header fields the protocol sets, which a caller's own headers cannot replace (lowercased).
    static let protocolFields: Set<String> = [
        "zumo-api-version", "x-zumo-installation-id", "x-zumo-features", "x-zumo-version", "authorization",
        "x-zumo-auth", "content-type", "if-match", "accept", "user-agent",
    ]

    /// The URL of the batch endpoint (docs/batch.md).
    var batchURL: URL { baseURL.appendingPathComponent("batch") }

    /// Sends a request — with a JSON `body`, or `data` of `contentType` — ; a 401 is retried once with a refreshed token.
    /// `stillWanted`, when given, is asked just before the request goes, and a false answer sends nothing (throws a
    /// cancelled ``TransportError``). Each token is the account's (``Credentials/token(refresh:)``): one for another
    /// account sends nothing and throws ``AccountError``.
    /// `extraHeaders` are sent too, unless the protocol sets the same field.
    func send(
        _ method: String, _ url: URL, body: JSONValue? = nil, data: Data? = nil, contentType: String? = nil,
        ifMatch: Version? = nil, features: [String], extraHeaders: [String: String] = [:],
        stillWanted: (@Sendable () -> Bool)? = nil
    ) async throws -> HTTPResponseData {
        let installation = try await credentials.installationID.value()
        var token = try await credentials.token(refresh: false)
        var attempt = 0
        while true {
            var headers = extraHeaders.filter { name, _ in !Self.protocolFields.contains(name.lowercased()) }
            headers.merge([
                "ZUMO-API-VERSION": wire.version.rawValue, "X-ZUMO-INSTALLATION-ID": installation,
                "X-ZUMO-FEATURES": features.joined(separator: ","), "User-Agent": Self.userAgent,
                "X-ZUMO-VERSION": Self.userAgent, "Accept": "application/json",
            ]) { _, ours in ours }
            if body != nil { headers["Content-Type"] = "application/json" }
            if data != nil, let contentType { headers["Content-Type"] = contentType }
            if let ifMatch { headers["If-Match"] = ifMatch.entityTag }
            if let token {
                let authorization = wire.authorization(token)
                headers[authorization.field] = authorization.value
            }
            let request = HTTPRequestData(
                method: method, url: url, headers: headers, body: body?.serializedData() ?? data, timeout: timeout)
            logger.trace("HTTP request", metadata: [SyncLogKey.method: "\(method)", SyncLogKey.url: "\(url.path)"])
            // Asked last, after every wait above: a request no longer wanted is not sent at all.
            if let stillWanted, !stillWanted() { throw TransportError(.cancelled, host: url.host ?? "") }
            let response = try await transport.send(request)
            logger.trace("HTTP response", metadata: [SyncLogKey.status: "\(response.status)"])
            if let offer = response.header(BatchOffer.header) { batchOffer.learn(offer) }
            if response.status == 401, attempt == 0, credentials.refreshes {
                attempt += 1
                token = try await credentials.token(refresh: true)
                continue
            }
            return response
        }
    }
}

/// What the server said of its batch endpoint: its limits, from the `X-OfflineSync-Batch` header of its table
/// responses (`max-operations=500, max-bytes=1048576, atomic`), or nothing yet.
final class BatchOffer: Sendable {
    static let header = "X-OfflineSync-Batch"

    struct Limits: Sendable, Equatable {
        var operations: Int
        var bytes: Int
        /// Whether the server applies atomic batches (`atomic` in the header).
        var atomic = false
    }

    private let state: Locked<Limits?>
    private let mode: SyncClient.BatchPush

    init(_ mode: SyncClient.BatchPush) {
        self.mode = mode
        state = Locked(mode == .always ? Limits(operations: 100, bytes: 1 << 20, atomic: true) : nil)
    }

    /// The limits, when batches are to be sent.
    var limits: Limits? { mode == .never ? nil : state.withLock { $0 } }

    /// Takes the limits of a header value; one it cannot read withdraws the offer.
    func learn(_ value: String) {
        var fields: [String: Int] = [:]
        var atomic = false
        for part in value.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 2, let number = Int(pair[1]), number > 0 { fields[pair[0].lowercased()] = number }
            if pair.count == 1, pair[0].lowercased() == "atomic" { atomic = true }
        }
        let limits = fields["max-operations"].flatMap { operations in
            fields["max-bytes"].map { Limits(operations: operations, bytes: $0, atomic: atomic) }
        }
        state.withLock { $0 = limits }
    }

    /// Forgets the offer (the server refused a batch: an older instance behind the same address, a proxy).
    func withdraw() { state.withLock { $0 = nil } }

    /// Whether batches may be sent at all (not `.never`, not the v3 dialect).
    var mayBeOffered: Bool { mode != .never }

    private let askedOnce = Locked(false)

    /// Whether a request was already made only to learn the offer (a change set's push asks once per client).
    var asked: Bool { askedOnce.withLock { $0 } }

    /// Notes that a request was made only to learn the offer.
    func markAsked() { askedOnce.withLock { $0 = true } }
}

/// Log metadata keys, declared once.
enum SyncLogKey {
    static let method = "sync.http.method"
    static let url = "sync.http.path"
    static let status = "sync.http.status"
    static let table = "sync.table"
    static let operations = "sync.push.operations"
    static let failed = "sync.push.failed"
    static let rows = "sync.pull.rows"
    static let pages = "sync.pull.pages"
    static let attempt = "sync.retry.attempt"
    static let pageSize = "sync.pull.page_size"
}

extension HTTPResponseData {
    /// The body as JSON, or nil when it is empty or not JSON.
    var json: JSONValue? { body.isEmpty ? nil : try? JSONValue(parsing: body) }

    /// The item the body holds (an object with an `id`; an error body is not an item), with its
    /// `version` taken from the `ETag` when there is one.
    var item: JSONValue? {
        // An id is a string, or the number of a table of integer ids (read by the online table API only).
        guard case .object(var members) = json, members["id"]?.stringValue != nil || members["id"]?.intValue != nil
        else { return nil }
        if let tag = header("ETag"), let version = try? Version(entityTag: tag) {
            members["version"] = .string(version.rawValue)
        }
        return .object(members)
    }

    /// The server's message: the `error` of a JSON body, or the text.
    var message: String? {
        if let error = json?["error"]?.stringValue { return error }
        return body.isEmpty ? nil : String(decoding: body.prefix(500), as: UTF8.self)
    }
}
