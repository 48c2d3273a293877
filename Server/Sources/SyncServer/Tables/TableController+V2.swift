import Foundation
import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// The Azure Mobile Apps dialect of the table routes (`ZUMO-API-VERSION: 2.0.0`, PROTOCOL.md), as
/// ``V2TableWire`` answers them.
extension TableController {
    /// A page of a v2 query: the rows as the store wrote them, in `{"count","results"}` when the count was asked,
    /// with a `Link` to the next page when more rows match and `$top` has rows left.
    func v2Page(_ request: Request, query: ODataQuery, page: QueryPage) throws -> Response {
        var body = page.itemsJSON
        if let total = page.totalCount {
            body = Array(#"{"count":\#(total),"results":"#.utf8) + body + [UInt8(ascii: "}")]
        }
        var response = JSONResponse.make(.ok, bytes: body)
        if page.hasMore, query.top.map({ $0 > page.itemCount }) ?? true {
            response.headers[HTTPField.Name("Link")!] =
                nextLink(request, query: query, returned: page.itemCount) + "; rel=next"
        }
        return response
    }

    /// `GET /tables/T/{id}`: the item, or 404 (a tombstone too, unless `__includeDeleted=true`).
    func v2Read(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (schema, id) = try await target(call)
        let scope = try await authorize(.read, schema, call)
        let includeDeleted = try includesDeleted(request)
        guard
            let item = try await perform({
                try await store.item(id, in: schema.name, scope: scope, includeDeleted: includeDeleted)
            })
        else {
            throw APIError(.notFound, TableStoreError.notFound.description)
        }
        return JSONResponse.item(.ok, item)
    }

    /// `PATCH /tables/T/{id}`: the fields sent change, with `If-Match` (412) or a body `version` (409) as the
    /// precondition.
    func v2Update(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (_, item) = try await write(.change, call) { schema, id in
            let id = try Self.item(id)
            return try Self.v2Change(
                id: id, body: try await changeFields(request, id: id, schema), ifMatch: try ifMatch(request),
                includeDeleted: try includesDeleted(request))
        }
        return JSONResponse.item(.ok, item)
    }

    /// What a v2 `PATCH` asks, as the pipeline's write (no I/O): the body's fields change, but for `deleted` (v2
    /// changes the flag by DELETE and undelete only) and `id`; the precondition is `If-Match` (a failure answered 412)
    /// or else the body's `version` (409, as the Node.js server answers).
    ///
    /// - Throws: ``APIError`` 400 when the body's `version` is not a string.
    static func v2Change(id: ItemID, body: [String: JSONValue], ifMatch: Precondition?, includeDeleted: Bool) throws
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

    /// `DELETE /tables/T/{id}`: the item, now a tombstone (or gone without soft delete).
    func v2Delete(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (_, item) = try await write(.delete, call) { _, id in
            WriteRequest(id: try Self.item(id), action: .delete, precondition: try ifMatch(request))
        }
        return JSONResponse.item(.ok, item)
    }

    /// `POST /tables/T/{id}`: the tombstone brought back.
    func v2Undelete(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (_, item) = try await write(.undelete, call) { _, id in
            WriteRequest(id: try Self.item(id), action: .undelete, precondition: try ifMatch(request))
        }
        return JSONResponse.item(.ok, item)
    }
}
