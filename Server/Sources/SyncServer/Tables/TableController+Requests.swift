import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import NIOCore
import NIOHTTP1
import SyncCore
import SyncOData

extension TableController {
    /// The table named in the path: 400 for an invalid name, 404 for one not served.
    func schema(_ call: TableCall) async throws -> TableSchema {
        let text = call.table
        let name: TableName
        do { name = try TableName(text) } catch { throw APIError.badRequest("\(error)") }
        guard let schema = try await store.schema(of: name) else {
            throw APIError(.notFound, TableStoreError.unknownTable(name).description)
        }
        if schema.configuration.integerIDs, call.dialect == .v3 {
            throw APIError.badRequest(
                "\(schema.name) has integer ids, which Datasync clients cannot hold: call it with ZUMO-API-VERSION 2.0.0"
            )
        }
        return schema
    }

    /// The table and the item id named in the path.
    func target(_ call: TableCall) async throws -> (TableSchema, ItemID) {
        let schema = try await schema(call)
        return (schema, try Self.item(pathID(call, schema)))
    }

    /// The item id of an item route's path (a table's URL names none: 404).
    static func item(_ id: ItemID?) throws -> ItemID {
        guard let id else { throw APIError(.notFound, "The URL names no item") }
        return id
    }

    /// The item id named in the path, nil on a table's URL: 400 when it is not an id. In a table of integer ids, the
    /// stored form of the number (a number that is not positive: 404).
    func pathID(_ call: TableCall, _ schema: TableSchema) throws -> ItemID? {
        guard let raw = call.item else { return nil }
        guard let text = ODataQuery.percentDecode(raw) else {
            throw APIError.badRequest("Invalid item id: bad percent-encoding")
        }
        if schema.configuration.integerIDs {
            guard let id = try IntegerIDs.stored(path: text) else {
                throw APIError(.notFound, TableStoreError.notFound.description)
            }
            return id
        }
        do { return try ItemID(text) } catch { throw APIError.badRequest("\(error)") }
    }

    /// Checks that the caller may do `operation` on the table (401, 403 or 405 otherwise, or the read hook's
    /// refusal), and returns the rows the caller may see and change: a per-user table's owned by the caller's
    /// subject, a claim-scoped table's of the caller's claim, a membership-scoped table's of the groups the caller may
    /// read (for a read) or write, those the read hook's filter passes, without its hidden columns.
    func authorize(_ operation: TableOperation, _ schema: TableSchema, _ call: TableCall) async throws
        -> RowScope
    {
        let configuration = schema.configuration
        try checkAccess(operation, schema, call)
        let view = try await view(schema.name, call)
        var scope = RowScope(
            owner: configuration.perUser ? call.caller?.subject : nil, filter: view.filter,
            hiddenColumns: view.hiddenColumns)
        if let claimScope = configuration.claimScope {
            let claimed = call.caller?.claims[claimScope.claim]
            guard let value = claimed?.stringValue ?? claimed?.intValue.map(String.init) else {
                throw APIError(
                    .forbidden,
                    "Your token has no '\(claimScope.claim)' claim, which \(schema.name)'s rows are scoped by",
                    reason: "auth_forbidden")
            }
            let mine = ODataExpression.binary(.eq, .member(claimScope.column), .literal(.string(value)))
            scope.filter = scope.filter.map { .binary(.and, mine, $0) } ?? mine
            scope.stamped[claimScope.column] = .string(value)
        }
        scope.membership = try await membership(operation, schema, call)
        return scope
    }

    /// The scope of a write that has `effect` (``authorize(_:_:_:)`` with the effect's access rule).
    func authorize(_ effect: WriteEffect, _ schema: TableSchema, _ call: TableCall) async throws -> RowScope {
        try await authorize(effect.operation, schema, call)
    }

    /// Checks the table's access rule for `operation` (401, 403, or 405 listing the methods the table allows).
    func checkAccess(_ operation: TableOperation, _ schema: TableSchema, _ call: TableCall) throws {
        let configuration = schema.configuration
        let isItem = call.item != nil
        let methods: [(HTTPRequest.Method, TableOperation)] =
            isItem
            ? [(.get, .read), (.patch, .update), (.delete, .delete), (.post, .update)]
            : [(.get, .read), (.post, .insert)]
        try Authorization.check(
            configuration.access(operation, authenticates: authenticates), caller: call.caller,
            what: "\(Self.verbs[operation]!) \(schema.name)",
            allowed: methods.filter { configuration.access($0.1, authenticates: authenticates) != .disabled }.map(\.0))
    }

    /// Checks the access rule of a further effect of a write (a replace that deletes: the delete rule).
    func checkAccess(_ effect: WriteEffect, _ schema: TableSchema, _ call: TableCall) throws {
        try checkAccess(effect.operation, schema, call)
    }

    /// What a caller's write stores: the fields without those for hidden columns (the caller may not write them; the
    /// write hooks, which run after, may), and with the values its scope sets (a claim scope's column: on insert; a
    /// write that gives another value would move the row out of the caller's scope, and is refused, 403).
    func scopedFields(_ fields: [String: JSONValue], _ scope: RowScope, inserting: Bool) throws -> [String: JSONValue] {
        var fields = scope.hiddenColumns.isEmpty ? fields : fields.filter { !scope.hides($0.key) }
        for (column, value) in scope.stamped {
            if let given = fields[column], given != value {
                throw APIError(
                    .forbidden, "'\(column)' is \(value.serialized()) for you: a row cannot be moved out of your scope",
                    reason: "auth_forbidden")
            }
            if inserting { fields[column] = value }
        }
        return fields
    }

    private static let verbs: [TableOperation: String] = [
        .read: "Reading", .insert: "Inserting into", .update: "Updating", .delete: "Deleting from",
    ]

    /// The request body as a JSON object (``JSONBody``): 415 when not JSON, 413 past the size limit, 400 when it
    /// is not an object.
    func body(_ request: Request) async throws -> [String: JSONValue] {
        let value = try await JSONBody.read(request, maxBytes: maxBodySize, what: "The request body")
        guard case .object(let members) = value else { throw APIError.badRequest("The body must be a JSON object") }
        return members
    }

    /// The body of a change to the item `id` (PATCH, v3's PUT): system properties of the right types, and an `id`,
    /// if given, equal to the URL's — compared as bytes: two normalizations of one text are two ids (issue 14,
    /// point 9). 400 otherwise.
    func changeFields(_ request: Request, id: ItemID, _ schema: TableSchema) async throws -> [String: JSONValue] {
        let fields = try await body(request)
        try checkSystemProperties(fields, schema)
        let integerIDs = schema.configuration.integerIDs
        if let bodyID = fields[SystemProperty.id.rawValue], bodyID != .null,
            (integerIDs ? IntegerIDs.storedText(of: bodyID) : bodyID.stringValue)
                .map({ !$0.utf8.elementsEqual(id.rawValue.utf8) }) ?? true
        {
            throw APIError.badRequest("The item ID and querystring ID did not match")
        }
        return fields
    }

    /// Refuses system properties of the wrong JSON type (the server sets them, but a client that sends
    /// `"version": {}` has a bug worth hearing about): strings for id, version and the dates, a bool for deleted; in a
    /// table of integer ids, a number for id.
    func checkSystemProperties(_ fields: [String: JSONValue], _ schema: TableSchema) throws {
        for property in SystemProperty.allCases {
            guard let value = fields[property.rawValue], value != .null else { continue }
            if property == .id, schema.configuration.integerIDs {
                guard value.intValue != nil || value == .string("") else {
                    throw APIError.badRequest("Invalid item: 'id' must be an integer")
                }
                continue
            }
            let isString = value.stringValue != nil
            let fits = property == .deleted ? value.boolValue != nil : isString
            if !fits {
                throw APIError.badRequest(
                    "Invalid item: '\(property.rawValue)' must be \(property == .deleted ? "true or false" : "a string")"
                )
            }
        }
    }

    /// The `If-Match` precondition, if any; 400 when malformed.
    func ifMatch(_ request: Request) throws -> Precondition? {
        guard let header = request.headers[.ifMatch] else { return nil }
        do { return try Precondition(ifMatch: header) } catch { throw APIError.badRequest("If-Match: \(error)") }
    }

    /// Whether `__includeDeleted=true` (any case) is in the query string.
    func includesDeleted(_ request: Request) throws -> Bool {
        let pairs = (request.uri.query ?? "").split(separator: "&").filter {
            $0.lowercased().hasPrefix("__includedeleted=")
        }
        do { return try ODataQuery(parsing: pairs.joined(separator: "&")).includeDeleted } catch {
            throw APIError.badRequest(error.description)
        }
    }

    /// Runs a store call, turning its errors into API errors. A precondition failure answers
    /// `conflictStatus` (412 when the precondition came from `If-Match`, 409 from a body `version`); a conflict's
    /// body is the stored item as `shown` shows it (the dialect's ``TableWire/shown(_:)``; as stored by default).
    func perform<T>(
        table: TableName? = nil, conflictStatus: HTTPResponse.Status = .preconditionFailed,
        shown: (JSONValue) -> JSONValue = { $0 }, _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await body()
        } catch let error as TableStoreError {
            switch error {
            case .unknownTable, .notFound: throw APIError(.notFound, error.description)
            case .alreadyExists(let stored):
                countConflict(table)
                throw APIError(conflict: .conflict, storedItem: shown(stored))
            case .idTaken:
                countConflict(table)
                throw APIError(.conflict, error.description)
            case .preconditionFailed(let stored):
                countConflict(table)
                throw APIError(conflict: conflictStatus, storedItem: shown(stored))
            case .invalidItem, .invalidQuery: throw APIError.badRequest(error.description)
            case .unavailable: throw APIError(.serviceUnavailable, error.description)
            case .forbidden: throw APIError(.forbidden, error.description, reason: "auth_forbidden")
            }
        }
    }

    func countConflict(_ table: TableName?) {
        Counter(label: MetricLabel.conflicts, dimensions: [(MetricLabel.table, table?.canonical ?? "unknown")])
            .increment()
        stats.record { $0.conflicts += 1 }
    }

    /// The absolute URL of this request's base (`http://host`), from headers that are checked (``origin(forwardedProto:authority:)``).
    func baseURL(_ request: Request) -> String {
        Self.origin(
            forwardedProto: request.headers[HTTPField.Name("X-Forwarded-Proto")!],
            authority: request.head.authority ?? request.headers[HTTPField.Name("Host")!])
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

    /// The URL of the item `id`, whose stored row is `item`: its id as the row shows it (a number, in a table of
    /// integer ids).
    func itemURL(_ request: Request, id: ItemID, item: JSONValue) -> String {
        let shown = item[SystemProperty.id.rawValue]?.intValue.map { String($0) } ?? id.rawValue
        return baseURL(request) + request.uri.path + "/" + ODataQuery.percentEncode(shown)
    }

    /// The next page's URL, built from the parsed query (so an option written `%24top` is not kept beside the new
    /// `$top`): `$skip` advanced and `$top` reduced by `returned`; a `ZUMO-API-VERSION` parameter is kept, other
    /// parameters are not.
    func nextLink(_ request: Request, query: ODataQuery, returned: Int) -> String {
        var next = query
        next.skip = (query.skip ?? 0) + returned
        next.top = query.top.map { $0 - returned }
        var link = baseURL(request) + request.uri.path + "?" + next.queryString
        if let version = APIVersionMiddleware.queryVersion(request.uri.query ?? "") {
            link += "&ZUMO-API-VERSION=" + ODataQuery.percentEncode(ODataQuery.percentDecode(version) ?? version)
        }
        return link
    }
}

/// Metric labels and dimensions, declared once.
enum MetricLabel {
    static let rowsReturned = "sync.rows.returned"
    static let conflicts = "sync.conflicts"
    static let table = "sync.table"
    static let refusals = "sync.refusals"
    static let reason = "sync.reason"
}
