import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import NIOCore
import SyncCore
import SyncOData

/// The `/tables/{name}` routes (PROTOCOL.md §3–§4), over a ``TableStore``.
struct TableController: Sendable {
    let store: any TableStore
    let maxBodySize: Int
    let queryLimits: QueryLimits
    let makeID: @Sendable () -> String
    /// Whether the server checks tokens (then tables need signed-in callers unless configured otherwise).
    let authenticates: Bool
    /// Wakes the `GET /changes` requests that follow a table when a write to it commits.
    let changes: ChangeHub
    /// This instance's counts, for the console.
    let stats: ServerStats

    func addRoutes(to group: RouterGroup<SyncRequestContext>) {
        group.get("{name}") { request, context in try await query(request, context) }
        group.post("{name}") { request, context in try await insert(request, context) }
        group.get("{name}/{id}") { request, context in try await read(request, context) }
        group.patch("{name}/{id}") { request, context in try await update(request, context) }
        group.put("{name}/{id}") { request, context in try await v3Replace(request, context) }
        group.delete("{name}/{id}") { request, context in try await delete(request, context) }
        group.post("{name}/{id}") { request, context in try await undelete(request, context) }
    }

    // MARK: Handlers

    func query(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let schema = try await schema(context)
        let owner = try authorize(.read, schema, context)
        let query = try parsedQuery(request, dialect: context.dialect)
        let configuration = schema.configuration
        if let top = query.top, top > configuration.maxTop {
            throw APIError.badRequest("$top: you cannot request more than \(configuration.maxTop) records")
        }
        let limit = min(query.top ?? configuration.pageSize, configuration.pageSize)
        let page = try await perform {
            try await store.query(schema.name, query, owner: owner, limit: limit, maxBytes: queryLimits.maxPageBytes)
        }
        Counter(label: MetricLabel.rowsReturned, dimensions: [(MetricLabel.table, schema.name.canonical)])
            .increment(by: page.itemCount)
        stats.record { $0.rowsReturned += page.itemCount }
        if context.dialect == .v3 { return try v3Page(request, query: query, page: page) }
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

    /// A request's query options in `dialect`, within the server's limits; a 400 in the API's words otherwise.
    func parsedQuery(_ request: Request, dialect: ODataDialect) throws -> ODataQuery {
        var query: ODataQuery
        do { query = try ODataQuery(parsing: request.uri.query ?? "", dialect: dialect) } catch {
            throw APIError.badRequest(error.description)
        }
        if dialect == .v3 { query = try Self.v3Query(query) }
        if let refusal = queryLimits.refusal(query) { throw APIError.badRequest(refusal, reason: "query_cost") }
        return query
    }

    func read(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (schema, id) = try await target(context)
        let owner = try authorize(.read, schema, context)
        if context.dialect == .v3 { return try await v3Read(request, schema: schema, id: id, owner: owner) }
        let includeDeleted = try includesDeleted(request)
        guard
            let item = try await perform({
                try await store.item(id, in: schema.name, owner: owner, includeDeleted: includeDeleted)
            })
        else {
            throw APIError(.notFound, TableStoreError.notFound.description)
        }
        return JSONResponse.item(.ok, item)
    }

    func insert(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let schema = try await schema(context)
        let owner = try authorize(.insert, schema, context)
        var fields = try await body(request)
        try checkSystemProperties(fields)
        let id: ItemID
        switch fields[SystemProperty.id.rawValue] {
        case nil, .null?:
            id = try ItemID(makeID())
        case .string(let text)?:
            do { id = try ItemID(text) } catch { throw APIError.badRequest("\(error)") }
        default:
            throw APIError.badRequest("Invalid item: 'id' must be a string")
        }
        fields[SystemProperty.id.rawValue] = nil
        if context.dialect == .v3 { try Self.v3CheckID(id) }
        let item = try await perform(table: schema.name, dialect: context.dialect) {
            try await store.insert(fields, id: id, into: schema.name, owner: owner)
        }
        changes.publish(Self.changeKey(schema, owner: owner))
        if context.dialect == .v3 { return Self.v3ItemResponse(.created, item, location: itemURL(request, id: id)) }
        return JSONResponse.item(.created, item, location: itemURL(request, id: id))
    }

    func update(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        if context.dialect == .v3 { throw Self.v3MethodNotAllowed(request) }
        let (schema, id) = try await target(context)
        let owner = try authorize(.update, schema, context)
        var fields = try await changeFields(request, id: id)
        fields[SystemProperty.deleted.rawValue] = nil  // v2 changes the flag by DELETE and undelete only
        fields[SystemProperty.id.rawValue] = nil
        var precondition = try ifMatch(request)
        let fromHeader = precondition != nil
        if precondition == nil, let version = fields[SystemProperty.version.rawValue] {
            guard let text = version.stringValue else {
                throw APIError.badRequest("Invalid item: 'version' must be a string")
            }
            precondition = .version(Version(text))
        }
        let includeDeleted = try includesDeleted(request)
        let item = try await perform(table: schema.name, conflictStatus: fromHeader ? .preconditionFailed : .conflict) {
            try await store.update(
                id, with: fields, in: schema.name, owner: owner, precondition: precondition,
                includeDeleted: includeDeleted)
        }
        changes.publish(Self.changeKey(schema, owner: owner))
        return JSONResponse.item(.ok, item)
    }

    func delete(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        if context.dialect == .v3 { return try await v3Delete(request, context) }
        let (schema, id) = try await target(context)
        let owner = try authorize(.delete, schema, context)
        let precondition = try ifMatch(request)
        let item = try await perform(table: schema.name) {
            try await store.delete(id, from: schema.name, owner: owner, precondition: precondition)
        }
        changes.publish(Self.changeKey(schema, owner: owner))
        return JSONResponse.item(.ok, item)
    }

    func undelete(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        if context.dialect == .v3 { throw Self.v3MethodNotAllowed(request) }
        let (schema, id) = try await target(context)
        let owner = try authorize(.update, schema, context)
        let precondition = try ifMatch(request)
        let item = try await perform(table: schema.name) {
            try await store.undelete(id, in: schema.name, owner: owner, precondition: precondition)
        }
        changes.publish(Self.changeKey(schema, owner: owner))
        return JSONResponse.item(.ok, item)
    }
}
