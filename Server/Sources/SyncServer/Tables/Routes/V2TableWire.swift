import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// Azure Mobile Apps 2.0.0 (PROTOCOL.md): items with `createdAt`, pages as an array (or `{"count","results"}`)
/// with a `Link` header, `PATCH` updates, `DELETE` answered with the item, `POST` on an item undeletes it.
struct V2TableWire: TableWire {
    var odata: ODataDialect { .v2 }
    var itemMethods: [HTTPRequest.Method] { [.get, .patch, .delete, .post] }
    func normalized(_ query: ODataQuery) throws -> ODataQuery { query }
    /// Every system property; with `$select` exactly the fields named (system properties only when named), as the
    /// Node.js and ASP.NET servers answer (issue 50).
    func rowShape(for query: ODataQuery) -> RowShape {
        query.select.map { RowShape(systemProperties: Set($0.compactMap(SystemProperty.init(rawValue:)))) } ?? .stored
    }
    func shown(_ item: JSONValue) -> JSONValue { item }

    /// `PATCH` changes, `DELETE` deletes, `POST` undeletes; `PUT` is not a v2 route (404 here, answered 405 by
    /// ``MethodNotAllowedMiddleware``).
    func itemEffect(_ method: HTTPRequest.Method) throws -> WriteEffect {
        switch method {
        case .patch: .change
        case .delete: .delete
        case .post: .undelete
        default: throw HTTPError(.notFound)
        }
    }

    func insert(_ body: [String: JSONValue], _ schema: TableSchema) throws -> WriteRequest {
        try WriteBody.insert(body, schema)
    }

    /// A `PATCH` (``change(id:body:ifMatch:includeDeleted:)``), a `DELETE` or an undelete, with `If-Match` as the
    /// precondition.
    func itemWrite(
        _ effect: WriteEffect, id: ItemID, head: HTTPRequest, body: [String: JSONValue]?, _ schema: TableSchema
    ) throws -> WriteRequest {
        switch effect {
        case .change:
            let fields = try WriteBody.change(body ?? [:], id: id, schema)
            return try Self.change(
                id: id, body: fields, ifMatch: try Self.ifMatch(head), includeDeleted: try Self.includesDeleted(head))
        case .delete:
            return WriteRequest(id: id, action: .delete, precondition: try Self.ifMatch(head))
        case .undelete:
            return WriteRequest(id: id, action: .undelete, precondition: try Self.ifMatch(head))
        case .insert:
            throw HTTPError(.notFound)  // an insert goes to the table's URL
        }
    }

    /// What a v2 `PATCH` asks, as the service's write: the body's fields change, but for `deleted` (v2 changes the
    /// flag by DELETE and undelete only) and `id`; the precondition is `If-Match` (a failure answered 412) or else the
    /// body's `version` (409, as the Node.js server answers).
    ///
    /// - Throws: ``APIError`` 400 when the body's `version` is not a string.
    static func change(id: ItemID, body: [String: JSONValue], ifMatch: Precondition?, includeDeleted: Bool) throws
        -> WriteRequest
    {
        var fields = body
        fields[SystemProperty.deleted.rawValue] = nil
        fields[SystemProperty.id.rawValue] = nil
        var write = WriteRequest(id: id, action: .change(fields), precondition: ifMatch)
        if ifMatch == nil, let version = body[SystemProperty.version.rawValue] {
            guard let text = version.stringValue else {
                throw APIError.badRequest("Invalid item: 'version' must be a string")
            }
            write.precondition = .version(Version(text))
            write.conflictAnswer = .conflict
        }
        write.includeDeleted = includeDeleted
        return write
    }

    /// `GET /tables/T/{id}`: the item, or 404 (a tombstone too, unless `__includeDeleted=true`).
    func itemRead(_ head: HTTPRequest) throws -> ItemRead {
        ItemRead(includeDeleted: try Self.includesDeleted(head))
    }

    /// A page: the rows as the store wrote them, in `{"count","results"}` when the count was asked, with a `Link` to
    /// the next page when more rows match and `$top` has rows left.
    func page(_ page: QueryPage, query: ODataQuery, links: LinkBuilder) -> Response {
        var body = page.itemsJSON
        if let total = page.totalCount {
            body = Array(#"{"count":\#(total),"results":"#.utf8) + body + [UInt8(ascii: "}")]
        }
        var response = JSONResponse.make(.ok, bytes: body)
        if LinkBuilder.hasNext(query, page) {
            response.headers[HTTPField.Name("Link")!] = links.nextLink(query, returned: page.itemCount) + "; rel=next"
        }
        return response
    }

    func inserted(_ item: JSONValue, location: String) -> Response {
        JSONResponse.item(.created, item, location: location)
    }

    /// Every write answers the row as stored (a `DELETE`, the tombstone).
    func written(_ effect: WriteEffect, _ item: JSONValue) -> Response {
        JSONResponse.item(.ok, item)
    }

    func item(_ item: JSONValue, _ read: ItemRead) throws -> Response {
        JSONResponse.item(.ok, item)
    }
}
