import Foundation
import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// Datasync 3.0.0 (PROTOCOL-v3.md), on the same tables and stores as v2: a v2 client and a v3 client see each
/// other's rows. Items without `createdAt` (a v2 field), pages as `{"items","count","nextLink"}`, tombstones answered
/// 410, `ETag` and `Last-Modified` on an item, conditional requests (``ItemConditions``), `PUT` replace and `DELETE`
/// answered 204.
struct V3TableWire: TableWire {
    var odata: ODataDialect { .v3 }
    var itemMethods: [HTTPRequest.Method] { [.get, .put, .delete] }

    /// The query with its member names as the store knows them: system properties named in any case (v3 resolves
    /// names without regard to case; user columns already do); `createdAt` is refused, as v3 has no such property.
    func normalized(_ query: ODataQuery) throws -> ODataQuery {
        func name(_ member: String) throws -> String {
            guard let system = SystemProperty.allCases.first(where: { $0.rawValue.lowercased() == member.lowercased() })
            else { return member }
            if system == .createdAt {
                throw APIError.badRequest(
                    "'\(member)' is not a property under ZUMO-API-VERSION 3.0 (createdAt is v2's)")
            }
            return system.rawValue
        }
        func rewrite(_ expression: ODataExpression) throws -> ODataExpression {
            switch expression {
            case .literal: expression
            case .member(let member): .member(try name(member))
            case .not(let operand): .not(try rewrite(operand))
            case .negate(let operand): .negate(try rewrite(operand))
            case .binary(let op, let left, let right): .binary(op, try rewrite(left), try rewrite(right))
            case .function(let function, let arguments): .function(function, try arguments.map(rewrite))
            }
        }
        var result = query
        result.filter = try query.filter.map(rewrite)
        result.orderBy = try query.orderBy.map { ODataOrdering(try name($0.field), $0.direction) }
        result.select = try query.select?.map(name)
        return result
    }

    /// Every system property but `createdAt` (v2's), or with `$select` exactly the selected ones (``normalized(_:)``
    /// has named them as the store does).
    func rowShape(for query: ODataQuery) -> RowShape {
        guard let select = query.select else {
            return RowShape(systemProperties: Set(SystemProperty.allCases).subtracting([.createdAt]))
        }
        return RowShape(systemProperties: Set(select.compactMap(SystemProperty.init(rawValue:))))
    }

    /// An item as v3 shows it: without `createdAt` (a v2 field).
    func shown(_ item: JSONValue) -> JSONValue { Self.shown(item) }
    @Sendable static func shown(_ item: JSONValue) -> JSONValue { item.removing([.createdAt]) }

    /// `PUT` replaces (and deletes or undeletes), `DELETE` deletes; v2's `PATCH` and `POST` on an item are 405.
    func itemEffect(_ method: HTTPRequest.Method) throws -> WriteEffect {
        switch method {
        case .put: return .change
        case .delete: return .delete
        default:
            var refusal = APIError(
                .methodNotAllowed,
                "\(method) is v2's; under ZUMO-API-VERSION 3.0 an item is read (GET), replaced or undeleted (PUT) "
                    + "and deleted (DELETE)")
            refusal.headers[.allow] = "GET, PUT, DELETE"
            throw refusal
        }
    }

    /// An insert, with an id a v3 client can hold.
    func insert(_ body: [String: JSONValue], _ schema: TableSchema) throws -> WriteRequest {
        var write = try WriteBody.insert(body, schema)
        if let id = write.id { try Self.checkID(id) }
        write.shown = Self.shown
        return write
    }

    /// `PUT` (§3 replace, undelete): the stored item becomes the body — fields it leaves out become null, `deleted` is
    /// stored as given (absent: false), so a PUT with `__includedeleted=true` brings a tombstone back and one with
    /// `deleted: true` soft-deletes; its rules and hooks are those of every ``WriteEffect`` it has. `DELETE` (§3):
    /// the item becomes a tombstone. Both check the stored item first: 404 when missing, 410 for a tombstone (unless a
    /// PUT has `__includedeleted=true`), 412 with the item when `If-Match` names another version or another condition
    /// fails; a body `version` is not a precondition. 400 when a PUT body's `id` differs from the URL's.
    func itemWrite(
        _ effect: WriteEffect, id: ItemID, head: HTTPRequest, body: [String: JSONValue]?, _ schema: TableSchema
    ) throws -> WriteRequest {
        var write: WriteRequest
        switch effect {
        case .change:
            let fields = try WriteBody.change(body ?? [:], id: id, schema)
            write = WriteRequest(id: id, action: .replace(fields), includeDeleted: try Self.includesDeleted(head))
        case .delete:
            write = WriteRequest(id: id, action: .delete)
        case .insert, .undelete:
            throw HTTPError(.notFound)  // not an item route of v3 (itemEffect refuses them first)
        }
        write.storedCheck = Self.conditions(head)
        write.shown = Self.shown
        return write
    }

    /// `GET` (§3 read, §2): `__includedeleted`, and the conditions on the item.
    func itemRead(_ head: HTTPRequest) throws -> ItemRead {
        ItemRead(includeDeleted: try Self.includesDeleted(head), conditions: Self.conditions(head))
    }

    /// The item's conditional headers (§2) as data; a date that does not parse is no condition.
    static func conditions(_ head: HTTPRequest) -> ItemConditions {
        let fields = head.headerFields
        return ItemConditions(
            ifMatch: fields[.ifMatch], ifNoneMatch: fields[.ifNoneMatch],
            ifModifiedSince: fields[.ifModifiedSince].flatMap(HTTPDate.date),
            ifUnmodifiedSince: fields[.ifUnmodifiedSince].flatMap(HTTPDate.date))
    }

    /// Ids a v3 client can hold (PROTOCOL-v3.md §1: the toolkit client takes only these): 400 for others [ours].
    static func checkID(_ id: ItemID) throws {
        let bytes = Array(id.rawValue.utf8)
        func allowed(_ byte: UInt8, first: Bool) -> Bool {
            let alphanumeric =
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            return alphanumeric || (!first && "_.|:-".utf8.contains(byte))
        }
        guard (1...127).contains(bytes.count), allowed(bytes[0], first: true),
            bytes.dropFirst().allSatisfy({ allowed($0, first: false) })
        else {
            throw APIError.badRequest(
                "Invalid item id for ZUMO-API-VERSION 3.0: 1 to 127 letters, digits and _ . | : -, starting with a "
                    + "letter or digit")
        }
    }

    /// `{"count","items","nextLink"}` with the rows as the store wrote them (in ``rowShape(for:)``, so the bytes pass
    /// through), `count` when `$count=true` (else null), and `nextLink` — this query's own options with `$skip`
    /// advanced and `$top` reduced, as a query string without `?` (§5) — when more rows match and `$top` has rows
    /// left.
    func page(_ page: QueryPage, query: ODataQuery, links: LinkBuilder) -> Response {
        var next: JSONValue = .null
        if LinkBuilder.hasNext(query, page) {
            next = .string(LinkBuilder.following(query, returned: page.itemCount).queryString(dialect: .v3))
        }
        var body = Array(#"{"count":"#.utf8)
        (page.totalCount.map { JSONValue.int(Int64($0)) } ?? .null).write(to: &body)
        body += Array(#","items":"#.utf8)
        body += page.itemsJSON
        body += Array(#","nextLink":"#.utf8)
        next.write(to: &body)
        body.append(UInt8(ascii: "}"))
        return JSONResponse.make(.ok, bytes: body)
    }

    func inserted(_ item: JSONValue, location: String) -> Response {
        Self.itemResponse(.created, item, location: location)
    }

    /// A replace answers the item; a delete, 204 with no body.
    func written(_ effect: WriteEffect, _ item: JSONValue) -> Response {
        guard effect != .delete else { return Response(status: .noContent, headers: [.cacheControl: "no-cache"]) }
        return Self.itemResponse(.ok, item)
    }

    /// `GET` (§2): `If-Match` naming none of its versions or `If-Unmodified-Since` before its last change, 412 with
    /// the item; not modified (``ItemConditions/Verdict/notModified``), 304; else the item, with `ETag` and
    /// `Last-Modified`.
    func item(_ item: JSONValue, _ read: ItemRead) throws -> Response {
        let verdict = read.conditions.verdict(on: item)
        if verdict.matchFails || verdict.unmodifiedFails {
            throw APIError(conflict: .preconditionFailed, storedItem: Self.shown(item))
        }
        guard verdict.notModified else { return Self.itemResponse(.ok, item) }
        var response = Response(status: .notModified, headers: [.cacheControl: "no-cache"])
        if let version = item.version { response.headers[.eTag] = version.entityTag }
        if let updatedAt = item.updatedAt?.date { response.headers[.lastModified] = HTTPDate.string(updatedAt) }
        return response
    }

    /// A v3 item response: the item without `createdAt`, its `ETag` and `Last-Modified`, and a `Location`.
    static func itemResponse(_ status: HTTPResponse.Status, _ item: JSONValue, location: String? = nil) -> Response {
        var response = JSONResponse.item(status, shown(item), location: location)
        if let updatedAt = item.updatedAt?.date { response.headers[.lastModified] = HTTPDate.string(updatedAt) }
        return response
    }
}
