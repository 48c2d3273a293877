import Foundation
import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData

/// The Datasync dialect of the table routes (`ZUMO-API-VERSION: 3.0.x`, PROTOCOL-v3.md), on the same tables and
/// stores as v2: a v2 client and a v3 client see each other's rows. Items without `createdAt` (a v2 field), pages
/// as `{"items","count","nextLink"}`, tombstones answered 410, `ETag` and `Last-Modified` on an item, conditional
/// requests, `PUT` replace and `DELETE` answered 204.
extension TableController {
    /// `PUT /tables/T/{id}` under v3 (§3 replace, undelete): the stored item becomes the body — fields it leaves
    /// out become null, `deleted` is stored as given (absent: false), so a PUT with `__includedeleted=true` brings a
    /// tombstone back and one with `deleted: true` soft-deletes. Its rules and hooks are those of every
    /// ``WriteEffect`` it has: a change, and a delete (the delete rule too) or an undelete. 400 when the body's `id`
    /// differs from the URL's, 404 when missing (no upsert), 410 for a tombstone without `__includedeleted=true`, 412 with the item when
    /// `If-Match` names another version or another condition fails (``v3CheckLive(_:schema:id:scope:includeDeleted:)``);
    /// a body `version` is not a precondition. Under v2, PUT is not a route (405).
    func v3Replace(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (_, item) = try await write(.change, call) { schema, id in
            let id = try Self.item(id)
            let fields = try await changeFields(request, id: id, schema)
            let includeDeleted = try includesDeleted(request)
            var write = WriteRequest(
                id: id, action: .replace(fields), includeDeleted: includeDeleted, shown: Self.v3Item)
            write.checkStored = { controller, schema, scope in
                try await controller.v3CheckLive(
                    request, schema: schema, id: id, scope: scope, includeDeleted: includeDeleted)
            }
            return write
        }
        return Self.v3ItemResponse(.ok, item)
    }

    /// `DELETE /tables/T/{id}` under v3 (§3 delete): 204 with no body; 404 when missing, 410 when already a
    /// tombstone, 412 with the item when `If-Match` names another version or another condition fails.
    func v3Delete(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        _ = try await write(.delete, call) { _, id in
            let id = try Self.item(id)
            var write = WriteRequest(id: id, action: .delete, shown: Self.v3Item)
            write.checkStored = { controller, schema, scope in
                try await controller.v3CheckLive(request, schema: schema, id: id, scope: scope, includeDeleted: false)
            }
            return write
        }
        return Response(status: .noContent, headers: [.cacheControl: "no-cache"])
    }

    /// Before a change: 404 when the item is missing, 410 when it is a tombstone and `includeDeleted` is false;
    /// then a 412 with the item when `If-Match` names none of its versions (a list, `*`, quoted or bare tags; an
    /// empty or unreadable value names none), `If-None-Match` or `If-Modified-Since` finds it not modified, or
    /// `If-Unmodified-Since` finds it modified (§2).
    ///
    /// - Returns: The precondition of the write — with `If-Match`, the version just checked, so that a write
    ///   between the check and this one is a 412 too; nil without — and the item as checked.
    func v3CheckLive(
        _ request: Request, schema: TableSchema, id: ItemID, scope: RowScope, includeDeleted: Bool
    ) async throws -> (Precondition?, JSONValue) {
        let stored = try await v3StoredItem(schema: schema, id: id, scope: scope, includeDeleted: includeDeleted)
        let conditions = Self.conditions(request, item: stored)
        if conditions.matchFails || conditions.notModified || conditions.unmodifiedFails {
            countConflict(schema.name)
            throw APIError(conflict: .preconditionFailed, storedItem: Self.v3Item(stored))
        }
        guard request.headers[.ifMatch] != nil, let version = stored.version else { return (nil, stored) }
        return (.version(version), stored)
    }

    /// The stored item: 404 when missing, 410 when a tombstone and `includeDeleted` is false (v3 tells the two
    /// apart; v2 answers 404 for both).
    func v3StoredItem(schema: TableSchema, id: ItemID, scope: RowScope, includeDeleted: Bool) async throws
        -> JSONValue
    {
        let stored = try await perform {
            try await store.item(id, in: schema.name, scope: scope, includeDeleted: true)
        }
        guard let stored else { throw APIError(.notFound, TableStoreError.notFound.description) }
        if stored.isDeleted, schema.configuration.softDelete, !includeDeleted {
            throw APIError(.gone, "The item is deleted; send __includedeleted=true to read or change it")
        }
        return stored
    }

    /// What an item's conditional headers say of `item` (§2; dates in whole seconds, see ``v3Read``): `If-Match`
    /// names none of its version; `If-Unmodified-Since` (without `If-Match`) is before its last change; it is not
    /// modified — `If-None-Match` names its version, or (without `If-None-Match`) `If-Modified-Since` is not
    /// before its last change.
    static func conditions(_ request: Request, item: JSONValue) -> (
        matchFails: Bool, unmodifiedFails: Bool, notModified: Bool
    ) {
        let changed = item.updatedAt.map { wholeSeconds($0.date) }
        let ifMatch = request.headers[.ifMatch]
        let matchFails = ifMatch.map { !entityTags($0, match: item.version, weakMatches: false) } ?? false
        var unmodifiedFails = false
        if ifMatch == nil, let since = request.headers[.ifUnmodifiedSince].flatMap(httpDate), let changed {
            unmodifiedFails = changed > since
        }
        var notModified = false
        if let ifNoneMatch = request.headers[.ifNoneMatch] {
            notModified = entityTags(ifNoneMatch, match: item.version, weakMatches: true)
        } else if let since = request.headers[.ifModifiedSince].flatMap(httpDate), let changed {
            notModified = changed <= since
        }
        return (matchFails, unmodifiedFails, notModified)
    }

    /// A v3 item response: the item without `createdAt`, its `ETag` and `Last-Modified`, and a `Location`.
    static func v3ItemResponse(_ status: HTTPResponse.Status, _ item: JSONValue, location: String? = nil) -> Response {
        var response = JSONResponse.item(status, v3Item(item), location: location)
        if let updatedAt = item.updatedAt?.date { response.headers[.lastModified] = httpDate(updatedAt) }
        return response
    }

    /// 405 for a v2 method under v3 (PATCH, POST on an item): the dialect replaces with PUT and undeletes with it.
    static func v3MethodNotAllowed(_ request: Request) -> APIError {
        var refusal = APIError(
            .methodNotAllowed,
            "\(request.method) is v2's; under ZUMO-API-VERSION 3.0 an item is read (GET), replaced or undeleted (PUT) "
                + "and deleted (DELETE)")
        refusal.headers[.allow] = "GET, PUT, DELETE"
        return refusal
    }

    /// Ids a v3 client can hold (PROTOCOL-v3.md §1: the toolkit client takes only these): 400 for others [ours].
    static func v3CheckID(_ id: ItemID) throws {
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

    /// A page of a v3 query: `{"count","items","nextLink"}` with the rows as the store wrote them (in
    /// ``v3RowShape(_:)``, so the bytes pass through), `count` when `$count=true` (else null), and `nextLink` — this
    /// query's own options with `$skip` advanced and `$top` reduced, as a query string without `?` (§5) — when more
    /// rows match and `$top` has rows left.
    func v3Page(_ request: Request, query: ODataQuery, page: QueryPage) throws -> Response {
        var next: JSONValue = .null
        if page.hasMore, query.top.map({ $0 > page.itemCount }) ?? true {
            var following = query
            following.skip = (query.skip ?? 0) + page.itemCount
            following.top = query.top.map { $0 - page.itemCount }
            next = .string(following.queryString(dialect: .v3))
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

    /// The members of a v3 page's rows: every system property but `createdAt` (v2's), or with `$select` exactly
    /// the selected ones (``v3Query(_:)`` has named them as the store does).
    static func v3RowShape(_ query: ODataQuery) -> RowShape {
        guard let select = query.select else {
            return RowShape(systemProperties: Set(SystemProperty.allCases).subtracting([.createdAt]))
        }
        return RowShape(systemProperties: Set(select.compactMap(SystemProperty.init(rawValue:))))
    }

    /// A v3 query with its member names as the store knows them: system properties named in any case (v3
    /// resolves names without regard to case; user columns already do); `createdAt` is refused, as v3 has no
    /// such property.
    static func v3Query(_ query: ODataQuery) throws -> ODataQuery {
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

    /// An item as v3 shows it: without `createdAt` (a v2 field).
    static func v3Item(_ item: JSONValue) -> JSONValue {
        item.removing([.createdAt])
    }

    /// `GET /tables/T/{id}` under v3 (§3 read, §2 conditional requests): 404 when missing, 410 when soft-deleted
    /// (unless `__includedeleted=true`); then `If-Match` (none matches: 412 with the item), `If-None-Match`
    /// (one matches: 304), and, only without those, `If-Unmodified-Since` (modified after the date: 412) and
    /// `If-Modified-Since` (not modified after it: 304). The dates compare in whole seconds, as RFC 9110 §13.1.3–4
    /// has it [ours]: `Last-Modified` has whole seconds, so a client that sends back the date it got must pass
    /// (the toolkit compares its milliseconds, PROTOCOL-v3.md §2). The item comes with `ETag` and `Last-Modified`.
    func v3Read(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = TableCall(context)
        let (schema, id) = try await target(call)
        let scope = try await authorize(.read, schema, call)
        let item = try await v3StoredItem(
            schema: schema, id: id, scope: scope, includeDeleted: try includesDeleted(request))
        let conditions = Self.conditions(request, item: item)
        if conditions.matchFails || conditions.unmodifiedFails {
            throw APIError(conflict: .preconditionFailed, storedItem: Self.v3Item(item))
        }
        guard conditions.notModified else { return Self.v3ItemResponse(.ok, item) }
        var response = Response(status: .notModified, headers: [.cacheControl: "no-cache"])
        if let version = item.version { response.headers[.eTag] = version.entityTag }
        if let updatedAt = item.updatedAt?.date { response.headers[.lastModified] = Self.httpDate(updatedAt) }
        return response
    }

    /// Whether a list of entity tags (`If-Match`, `If-None-Match`) names `version`: `*` names any, a weak tag
    /// (`W/"…"`) only when `weakMatches`; tags may be quoted or bare.
    static func entityTags(_ header: String, match version: Version?, weakMatches: Bool) -> Bool {
        for entry in header.split(separator: ",") {
            var tag = entry.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") {
                guard weakMatches else { continue }
                tag.removeFirst(2)
            }
            if tag.count >= 2, tag.hasPrefix("\""), tag.hasSuffix("\"") { tag = String(tag.dropFirst().dropLast()) }
            if let version, tag == version.rawValue { return true }
        }
        return false
    }

    /// `date` without its fraction of a second.
    static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }

    /// An HTTP date (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`), written or read.
    static func httpDate(_ date: Date) -> String { httpDateFormat.string(from: date) }
    static func httpDate(_ text: String) -> Date? { httpDateFormat.date(from: text) }

    private static var httpDateFormat: DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }
}
