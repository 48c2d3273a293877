import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// The `/tables/{name}` routes (PROTOCOL.md §3–§4): each reads its request with the wire of the request's dialect,
/// asks the table service, and answers with the wire. Every rule is the service's; every spelling, the wire's.
///
/// A write is three hops: ``TableService/target(_:_:)`` (the access rule, before the request is read), the wire's
/// translation into a ``WriteRequest``, and ``TableService/write(_:to:as:)``. `/batch` takes the same hops for each of
/// its operations (``write(_:head:call:wire:body:location:)``).
struct TableRoutes: Sendable {
    let service: TableService
    let maxBodySize: Int

    func addRoutes(to group: RouterGroup<SyncRequestContext>) {
        group.get("{name}") { request, context in try await query(request, context) }
        group.get("{name}/{id}") { request, context in try await read(request, context) }
        group.post("{name}") { request, context in try await write(request, context) }
        for method in [HTTPRequest.Method.patch, .put, .delete, .post] {
            group.on("{name}/{id}", method: method) { request, context in try await write(request, context) }
        }
    }

    /// `GET /tables/T`: a page of the rows the caller may read.
    func query(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let target = try await service.target(nil, context.call)
        let query = try context.wire.query(request.uri.query ?? "")
        let features = request.headers[HTTPField.Name("X-ZUMO-FEATURES")!] ?? ""
        let (page, token, horizon) = try await service.query(
            query, in: target, shape: context.wire.rowShape(for: query),
            reconciles: features.split(separator: ",").contains { $0 == PullHorizon.reconcilesFeature })
        var response = context.wire.page(page, query: query, links: LinkBuilder(request))
        if let token { response.headers[HTTPField.Name(TableConfiguration.scopeHeader)!] = token }
        if let horizon { response.headers[HTTPField.Name(TableConfiguration.horizonHeader)!] = horizon.description }
        if let watermark = page.watermark {
            response.headers[HTTPField.Name(TableConfiguration.watermarkHeader)!] = watermark.description
        }
        return response
    }

    /// `GET /tables/T/{id}`.
    func read(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let target = try await service.target(nil, context.call)
        let read = try context.wire.itemRead(request.head)
        let item = try await service.item(
            in: target, id: try target.item(), includeDeleted: read.includeDeleted,
            goneWhenDeleted: context.dialect == .v3)
        return try context.wire.item(item, read)
    }

    /// `POST /tables/T` and the writes to an item.
    func write(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        try await write(request.method, head: request.head, call: context.call, wire: context.wire) {
            try await JSONBody.object(request, maxBytes: maxBodySize)
        } location: { id, item in
            LinkBuilder(request).itemURL(id: id, item: item)
        }
    }

    /// A write as its route or a `/batch` operation asks it: the effect of `method` (an insert on a table's URL), the
    /// service's target (the access rule, before the body is read), the body, the wire's translation, the service's
    /// write, and the wire's answer.
    func write(
        _ method: HTTPRequest.Method, head: HTTPRequest, call: TableCall, wire: any TableWire,
        body: () async throws -> [String: JSONValue],
        location: (ItemID, JSONValue) -> String
    ) async throws -> Response {
        let effect = call.item == nil ? WriteEffect.insert : try wire.itemEffect(method)
        let target = try await service.target(effect, call)
        let fields = effect.readsFields ? try await body() : nil
        var request =
            effect == .insert
            ? try wire.insert(fields ?? [:], target.schema)
            : try wire.itemWrite(effect, id: try target.item(), head: head, body: fields, target.schema)
        if effect == .insert, let floor = head.headerFields[HTTPField.Name(TableConfiguration.resendFloorHeader)!] {
            guard let date = WireDate(parsing: floor) else {
                throw APIError.badRequest(
                    "\(TableConfiguration.resendFloorHeader): '\(floor.prefix(40))' is not a date")
            }
            request.resendFloor = date
        }
        let (id, item) = try await service.write(request, to: target, as: call)
        return effect == .insert ? wire.inserted(item, location: location(id, item)) : wire.written(effect, item)
    }
}
