import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// Everything in which the dialects of the table protocol differ on the server, as translation only: a wire reads a
/// request's head and body into the table service's values (a ``WriteRequest``, an ``ItemRead``, a query) and turns
/// the service's results into its dialect's responses. No I/O and no service in it, so each cell is tested without a
/// server (WireTests). The routes ask the wire of the request's dialect and hold no branch on it; a new dialect is
/// one more conforming type (and a case in ``APIVersionMiddleware``).
protocol TableWire: Sendable {
    /// The query language of `$filter` and `$orderby`.
    var odata: ODataDialect { get }
    /// The methods an item's URL takes (the others are answered 405 with these in `Allow`).
    var itemMethods: [HTTPRequest.Method] { get }
    /// A parsed query with its member names as the store knows them.
    func normalized(_ query: ODataQuery) throws -> ODataQuery
    /// The system properties the rows of a page carry (the store writes them so, once).
    func rowShape(for query: ODataQuery) -> RowShape
    /// An item as the dialect shows it (in a conflict's body).
    func shown(_ item: JSONValue) -> JSONValue

    /// The effect of `method` on an item's URL; the dialect's refusal for a method that is not its route.
    func itemEffect(_ method: HTTPRequest.Method) throws -> WriteEffect
    /// A `POST` to a table's URL as a write.
    func insert(_ body: [String: JSONValue], _ schema: TableSchema) throws -> WriteRequest
    /// A write to the item `id` (its `effect` from ``itemEffect(_:)``), from the request's head and, when the effect
    /// takes one (``takesBody(_:)``), its body.
    func itemWrite(
        _ effect: WriteEffect, id: ItemID, head: HTTPRequest, body: [String: JSONValue]?, _ schema: TableSchema
    ) throws -> WriteRequest
    /// What a `GET` of an item asks.
    func itemRead(_ head: HTTPRequest) throws -> ItemRead

    /// The answer to a query: its page.
    func page(_ page: QueryPage, query: ODataQuery, links: LinkBuilder) -> Response
    /// The answer to an insert.
    func inserted(_ item: JSONValue, location: String) -> Response
    /// The answer to a write to an item.
    func written(_ effect: WriteEffect, _ item: JSONValue) -> Response
    /// The answer to a read of an item.
    func item(_ item: JSONValue, _ read: ItemRead) throws -> Response
}

/// What a `GET` of an item asks: whether a tombstone is wanted, and (v3) the conditions on the stored item.
struct ItemRead: Sendable, Equatable {
    var includeDeleted = false
    var conditions = ItemConditions()
}

extension TableWire {
    /// The request's query string (what follows `?` in its path).
    static func queryString(_ head: HTTPRequest) -> Substring {
        guard let path = head.path, let mark = path.utf8.firstIndex(of: UInt8(ascii: "?")) else { return "" }
        return path[path.utf8.index(after: mark)...]
    }

    /// Whether `__includeDeleted=true` (any case) is in the query string; 400 for another value.
    static func includesDeleted(_ head: HTTPRequest) throws -> Bool {
        let pairs = queryString(head).split(separator: "&").filter { $0.lowercased().hasPrefix("__includedeleted=") }
        do { return try ODataQuery(parsing: pairs.joined(separator: "&")).includeDeleted } catch {
            throw APIError.badRequest(error.description)
        }
    }

    /// The `If-Match` precondition, if any; 400 when malformed.
    static func ifMatch(_ head: HTTPRequest) throws -> Precondition? {
        guard let header = head.headerFields[.ifMatch] else { return nil }
        do { return try Precondition(ifMatch: header) } catch { throw APIError.badRequest("If-Match: \(error)") }
    }

    /// The request's query options, as this dialect reads them (a 400 in the API's words otherwise).
    func query(_ queryString: String) throws -> ODataQuery {
        let query: ODataQuery
        do { query = try ODataQuery(parsing: queryString, dialect: odata) } catch {
            throw APIError.badRequest(error.description)
        }
        return try normalized(query)
    }
}

extension ODataDialect {
    /// The table wire of the dialect.
    var tableWire: any TableWire {
        switch self {
        case .v2: V2TableWire()
        case .v3: V3TableWire()
        }
    }
}

extension SyncRequestContext {
    /// The table wire of the request's dialect.
    var wire: any TableWire { dialect.tableWire }
}
