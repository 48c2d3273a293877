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
    /// The tables' write hooks, by canonical table name.
    var hooks: [String: TableHooks] = [:]
    /// Where the files of attachment columns are kept.
    var attachments: Attachments?
    /// The membership-scoped tables of each members table (by its canonical name), with their group columns: a
    /// group is free to claim only when none of their rows belongs to it (``GroupClaim``).
    var groupedTables: [String: [GroupClaim.GroupedTable]] = [:]

    /// The routes; where the dialects differ, the request's ``TableWire`` reads and answers.
    func addRoutes(to group: RouterGroup<SyncRequestContext>) {
        group.get("{name}") { request, context in try await query(request, context) }
        group.post("{name}") { request, context in try await insert(request, context) }
        group.get("{name}/{id}") { request, context in try await context.wire.read(self, request, context) }
        group.patch("{name}/{id}") { request, context in try await context.wire.patch(self, request, context) }
        group.put("{name}/{id}") { request, context in try await context.wire.put(self, request, context) }
        group.delete("{name}/{id}") { request, context in try await context.wire.delete(self, request, context) }
        group.post("{name}/{id}") { request, context in try await context.wire.postItem(self, request, context) }
    }

    // MARK: Handlers of both dialects

    func query(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let schema = try await schema(call)
        let scope = try await authorize(.read, schema, call)
        let query = try parsedQuery(request, wire: context.wire)
        let configuration = schema.configuration
        if let top = query.top, top > configuration.maxTop {
            throw APIError.badRequest("$top: you cannot request more than \(configuration.maxTop) records")
        }
        let limit = min(query.top ?? configuration.pageSize, configuration.pageSize)
        let token = try await scopeToken(scope, schema: schema)
        let page = try await perform {
            try await store.query(
                schema.name, query, scope: scope, limit: limit, maxBytes: queryLimits.maxPageBytes,
                shape: context.wire.rowShape(for: query))
        }
        Counter(label: MetricLabel.rowsReturned, dimensions: [(MetricLabel.table, schema.name.canonical)])
            .increment(by: page.itemCount)
        stats.record { $0.rowsReturned += page.itemCount }
        var response = try context.wire.page(self, request, query: query, page: page)
        if let token { response.headers[HTTPField.Name(TableConfiguration.scopeHeader)!] = token }
        return response
    }

    /// A request's query options as `wire` reads them, within the server's limits; a 400 in the API's words
    /// otherwise.
    func parsedQuery(_ request: Request, wire: any TableWire) throws -> ODataQuery {
        var query: ODataQuery
        do { query = try ODataQuery(parsing: request.uri.query ?? "", dialect: wire.odata) } catch {
            throw APIError.badRequest(error.description)
        }
        query = try wire.normalized(query)
        if let refusal = queryLimits.refusal(query) { throw APIError.badRequest(refusal, reason: "query_cost") }
        return query
    }

    /// `POST /tables/T` in both dialects: a new row, with the id the body gives or a new one (in a table of integer
    /// ids, always the store's next one: a body may name none, or null, 0 or "").
    func insert(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (id, item) = try await write(.insert, call) { schema, _ in
            var fields = try await body(request)
            try checkSystemProperties(fields, schema)
            let id: ItemID
            switch (fields[SystemProperty.id.rawValue], schema.configuration.integerIDs) {
            case (nil, false), (.null?, false):
                id = try ItemID(makeID())
            case (.string(let text)?, false):
                do { id = try ItemID(text) } catch { throw APIError.badRequest("\(error)") }
            case (nil, true), (.null?, true), (.int(0)?, true), (.string("")?, true):
                id = try IntegerIDs.stored(try await perform { try await store.nextIntegerID(in: schema.name) })
            case (_, true):
                throw APIError.badRequest("Invalid item: \(schema.name)'s ids are assigned by the server; send no 'id'")
            default:
                throw APIError.badRequest("Invalid item: 'id' must be a string")
            }
            fields[SystemProperty.id.rawValue] = nil
            try context.wire.checkNewID(id)
            return WriteRequest(id: id, action: .insert(fields), shown: context.wire.shown)
        }
        return context.wire.inserted(item, location: itemURL(request, id: id, item: item))
    }
}
