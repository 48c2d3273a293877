import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// Everything in which the dialects of the table protocol differ on the server: how each table route reads its
/// request and writes its answer, over the dialect-free parts of ``TableController`` (schemas, access, the store,
/// change notices, errors). The routes ask the wire of the request's dialect and hold no branch on it; a new
/// dialect is one more conforming type (and a case in ``APIVersionMiddleware``).
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
    /// Refuses an id the dialect's clients cannot hold.
    func checkNewID(_ id: ItemID) throws
    /// The answer to a query: its page.
    func page(_ controller: TableController, _ request: Request, query: ODataQuery, page: QueryPage) throws -> Response
    /// The answer to an insert.
    func inserted(_ item: JSONValue, location: String) -> Response
    /// `GET /tables/T/{id}`.
    func read(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws -> Response
    /// `PATCH /tables/T/{id}`.
    func patch(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    /// `PUT /tables/T/{id}`.
    func put(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws -> Response
    /// `DELETE /tables/T/{id}`.
    func delete(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    /// `POST /tables/T/{id}`.
    func postItem(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
}

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
    func checkNewID(_ id: ItemID) throws {}

    func page(_ controller: TableController, _ request: Request, query: ODataQuery, page: QueryPage) throws -> Response
    {
        try controller.v2Page(request, query: query, page: page)
    }

    func inserted(_ item: JSONValue, location: String) -> Response {
        JSONResponse.item(.created, item, location: location)
    }

    func read(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws -> Response
    {
        try await controller.v2Read(request, context)
    }

    func patch(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    {
        try await controller.v2Update(request, context)
    }

    /// Not a v2 route: answered 405 by ``MethodNotAllowedMiddleware``.
    func put(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws -> Response
    {
        throw HTTPError(.notFound)
    }

    func delete(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    {
        try await controller.v2Delete(request, context)
    }

    func postItem(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    {
        try await controller.v2Undelete(request, context)
    }
}

/// Datasync 3.0.0 (PROTOCOL-v3.md): see ``TableController`` `+V3` for each answer.
struct V3TableWire: TableWire {
    var odata: ODataDialect { .v3 }
    var itemMethods: [HTTPRequest.Method] { [.get, .put, .delete] }
    func normalized(_ query: ODataQuery) throws -> ODataQuery { try TableController.v3Query(query) }
    func rowShape(for query: ODataQuery) -> RowShape { TableController.v3RowShape(query) }
    func shown(_ item: JSONValue) -> JSONValue { TableController.v3Item(item) }
    func checkNewID(_ id: ItemID) throws { try TableController.v3CheckID(id) }

    func page(_ controller: TableController, _ request: Request, query: ODataQuery, page: QueryPage) throws -> Response
    {
        try controller.v3Page(request, query: query, page: page)
    }

    func inserted(_ item: JSONValue, location: String) -> Response {
        TableController.v3ItemResponse(.created, item, location: location)
    }

    func read(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws -> Response
    {
        try await controller.v3Read(request, context)
    }

    func patch(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    {
        throw TableController.v3MethodNotAllowed(request)
    }

    func put(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws -> Response
    {
        try await controller.v3Replace(request, context)
    }

    func delete(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    {
        try await controller.v3Delete(request, context)
    }

    func postItem(_ controller: TableController, _ request: Request, _ context: SyncRequestContext) async throws
        -> Response
    {
        throw TableController.v3MethodNotAllowed(request)
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
