import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SyncCore
import SyncOData
import SyncSQLite

/// What this instance has done since it started, for the console's glance (``Console``): requests answered,
/// conflicts (409 and 412 with the stored item), rows returned by queries. Prometheus has the same by table and
/// status at `/metrics`; these are the totals, readable without it.
final class ServerStats: Sendable {
    struct Counts: Sendable {
        var requests = 0
        var conflicts = 0
        var rowsReturned = 0
    }

    let started = Date()
    private let counts = Locked(Counts())

    func record(_ change: (inout Counts) -> Void) { counts.withLock(change) }
    var current: Counts { counts.withLock { $0 } }
}

/// Counts each request in ``ServerStats``.
struct StatsMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let stats: ServerStats

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        defer { stats.record { $0.requests += 1 } }
        return try await next(request, context)
    }
}

/// The web console (docs/console.md): `GET /console` (the tables with their live and deleted rows, the server's
/// health and counts) and `GET /console/tables/{name}` (a table's rows, newest first, filtered with the API's
/// `$filter`, sorted by a column, deleted rows on demand, each row's whole JSON) — one page and its script and
/// styles, shipped as resources, reading `GET /console/api/…`. Read-only; it reads every user's rows of per-user
/// tables, so with auth its API needs an administrator (``AuthConfiguration/console``), and without auth the
/// console is served only as ``ConsoleMode`` says. The pages hold no data and no secret: the token is typed into
/// the page and sent as `Authorization: Bearer`, never in a URL.
struct Console: Sendable {
    /// The table service: the console reads through its store, limits, hooks and error wording.
    let service: TableService
    let configurations: [TableConfiguration]
    /// Who may read the API; nil without auth.
    let access: Access?
    /// `sqlite` or `postgres`.
    let database: String

    /// The largest page of rows the console asks.
    static let maxPage = 200

    func addRoutes(to router: Router<SyncRequestContext>) throws {
        let page = try Self.resource("console", "html")
        let script = try Self.resource("console", "js")
        let styles = try Self.resource("console", "css")
        let html = { @Sendable (_: Request, _: SyncRequestContext) in Self.file(page, "text/html; charset=utf-8") }
        router.get("console", use: html)
        router.get("console/tables/{name}", use: html)
        router.get("console/assets/console.js") { _, _ in Self.file(script, "text/javascript; charset=utf-8") }
        router.get("console/assets/console.css") { _, _ in Self.file(styles, "text/css; charset=utf-8") }
        router.get("console/api/overview") { _, context in try await overview(context) }
        router.get("console/api/tables/{name}") { request, context in try await rows(request, context) }
    }

    /// The tables with their counts, the database, and this instance's counts.
    func overview(_ context: SyncRequestContext) async throws -> Response {
        try check(context)
        var entries: [JSONValue] = []
        for table in configurations {
            var live = ODataQuery()
            live.includeTotalCount = true
            var all = live
            all.includeDeleted = true
            let scope = try await scope(table.name, context)
            let (liveCount, allCount) = try await (count(table.name, live, scope), count(table.name, all, scope))
            entries.append([
                "name": .string(table.name.rawValue), "perUser": .bool(table.perUser),
                "softDelete": .bool(table.softDelete), "live": .int(Int64(liveCount)),
                "deleted": .int(Int64(allCount - liveCount)),
            ])
        }
        let counts = service.stats.current
        let body: JSONValue = [
            "status": "ok", "database": .string(database),
            "startedAt": .string(WireDate(service.stats.started).description),
            "requests": .int(Int64(counts.requests)), "conflicts": .int(Int64(counts.conflicts)),
            "rowsReturned": .int(Int64(counts.rowsReturned)), "tables": .array(entries),
        ]
        return JSONResponse.make(.ok, body)
    }

    /// A page of a table's rows, every user's (as the table's read hook lets the caller see them), as the table API's
    /// v2 query options select and order them
    /// (`$filter`, `$orderby` — newest first when absent —, `$skip`, `$top` up to ``maxPage``,
    /// `__includeDeleted`): `{"items", "count", "columns"}`. A query the API refuses is refused in its words.
    func rows(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        try check(context)
        let name = try context.parameters.require("name")
        guard let table = configurations.first(where: { $0.name.canonical == name.lowercased() }),
            let schema = try await service.store.schema(of: table.name)
        else { throw APIError(.notFound, "Table '\(name)' does not exist") }
        var query = try V2TableWire().query(request.uri.query ?? "")
        try service.checkCost(query)
        if query.orderBy.isEmpty { query.orderBy = [ODataOrdering("updatedAt", .descending)] }
        query.includeTotalCount = true
        let limit = min(query.top ?? 50, Self.maxPage)
        let scope = try await scope(table.name, context)
        let page = try await service.perform {
            try await service.store.query(
                table.name, query, scope: scope, limit: limit, maxBytes: service.queryLimits.maxPageBytes)
        }
        let columns =
            SystemProperty.allCases.map(\.rawValue)
            + schema.columns.keys.filter { !scope.hides($0) }.sorted()
        var body = Array(#"{"columns":"#.utf8)
        JSONValue.array(columns.map(JSONValue.string)).write(to: &body)
        body += Array(#","count":\#(page.totalCount ?? page.itemCount),"items":"#.utf8) + page.itemsJSON
        body.append(UInt8(ascii: "}"))
        return JSONResponse.make(.ok, bytes: body)
    }

    /// With auth, only the console's administrators.
    private func check(_ context: SyncRequestContext) throws {
        guard let access else { return }
        try Authorization.check(access, caller: context.caller, what: "The console")
    }

    /// Every owner's rows of the table, as its read hook lets the console's caller see them.
    private func scope(_ table: TableName, _ context: SyncRequestContext) async throws -> RowScope {
        let view = try await service.hooks.view(table, context.call)
        return RowScope(filter: view.filter, hiddenColumns: view.hiddenColumns)
    }

    private func count(_ table: TableName, _ query: ODataQuery, _ scope: RowScope) async throws -> Int {
        let page = try await service.perform {
            try await service.store.query(table, query, scope: scope, limit: 0, maxBytes: 1)
        }
        return page.totalCount ?? 0
    }

    static func resource(_ name: String, _ type: String) throws -> ByteBuffer {
        guard let text = EmbeddedResources.files["\(name).\(type)"] else {
            throw ConfigurationError("the console's \(name).\(type) is not compiled into SyncServer")
        }
        return ByteBuffer(string: text)
    }

    static func file(_ buffer: ByteBuffer, _ type: String) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: type, .cacheControl: "no-cache",
                // The pages load only their own script and styles, and call only this server.
                HTTPField.Name("Content-Security-Policy")!:
                    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ],
            body: .init(byteBuffer: buffer))
    }
}
