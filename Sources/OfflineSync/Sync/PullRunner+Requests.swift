import Foundation
import Logging
import SyncCore
import SyncOData

/// The requests of a pull: the page query after a cursor, its answer read in either dialect, a page asked ahead.
extension PullRunner {
    /// What a pull reads from each row; the rest is stored as the text that arrived.
    static let pulledFields: Set<String> = ["id", "updatedAt", "deleted", "version"]

    static func cursor(of item: JSONValue) throws -> PullCursor {
        guard let id = item.itemID else {
            throw PullError.invalidRow(item["id"]?.intValue == nil ? "a row has no valid id" : item.missingIDReason)
        }
        guard let updatedAt = item.updatedAt else { throw PullError.invalidRow("row \(id) has no updatedAt") }
        return PullCursor(updatedAt: updatedAt, itemID: id)
    }

    /// Downloads the page after `cursor`. A server that refuses the `$top` (400) is asked again with
    /// `fallback` (a size it took before; the page then has `refusedTop`), or else without one, and the page
    /// it then returns with a `Link` tells its page size (PROTOCOL.md §5).
    func fetch(
        _ table: TableName, filter: ODataExpression?, after cursor: PullCursor?, pageSize: Int, fallback: Int? = nil,
        count: Bool, select: [String]? = nil
    ) async throws -> Page {
        var query = Self.pageQuery(filter: filter, after: cursor, pageSize: pageSize)
        query.includeTotalCount = count
        query.select = select
        // HZ [ours]: this client reconciles by itself when told the table's horizon (PullRunner+Horizon.swift).
        let features = cursor == nil ? ["TQ", "OL", "HZ"] : ["TQ", "OL", "IP", "HZ"]
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        let dialect = endpoint.wire.odata
        var (response, parsed) = try await sendPage(
            endpoint.url(table, query: query.queryString(dialect: dialect)), features, log)
        var asked: Int? = pageSize
        var refusedTop: Int?
        if response.status == 400, let fallback, fallback < pageSize {
            query.top = fallback
            let retried = try await sendPage(
                endpoint.url(table, query: query.queryString(dialect: dialect)), features, log)
            if retried.response.status == 200 {
                (response, parsed) = retried
                (asked, refusedTop) = (fallback, pageSize)
            }
        }
        if response.status == 400 {
            query.top = nil
            asked = nil
            let retried = try await sendPage(
                endpoint.url(table, query: query.queryString(dialect: dialect)), features, log)
            if retried.response.status == 200 { (response, parsed) = retried }
        }
        guard response.status == 200, var page = parsed else {
            throw PullError.rejected(status: response.status, message: response.message)
        }
        page.refusedTop = refusedTop
        page.scopeToken = response.header(Self.scopeHeader)
        page.horizon = response.header(Self.horizonHeader).flatMap(WireDate.init(parsing:))
        page.watermark = response.header(Self.watermarkHeader).flatMap(WireDate.init(parsing:))
        let hasLink = page.hasNextLink
        page.isLast = !hasLink && (asked.map { page.items.count < $0 } ?? true)
        if hasLink, page.items.count < (asked ?? Int.max) {
            page.serverPageSize = max(page.items.count, 1)
        } else if asked == nil {
            page.serverPageSize = min(pageSize, Self.protocolPageSize)
        }
        return page
    }

    /// The keyset query of the `pageSize` rows after `cursor` (all rows, deleted ones too, in cursor order).
    static func pageQuery(filter: ODataExpression?, after cursor: PullCursor?, pageSize: Int) -> ODataQuery {
        var query = ODataQuery(
            filter: filter, orderBy: [ODataOrdering("updatedAt"), ODataOrdering("id")], top: pageSize)
        query.includeDeleted = true
        if let cursor {
            let updatedAt = ODataExpression.member("updatedAt")
            let stamp = ODataExpression.literal(.date(cursor.updatedAt, .datetimeoffset))
            let after =
                cursor.itemID.map { id in
                    ODataExpression.binary(
                        .or, .binary(.gt, updatedAt, stamp),
                        .binary(
                            .and, .binary(.eq, updatedAt, stamp),
                            .binary(.gt, .member("id"), .literal(.string(id.rawValue)))))
                } ?? .binary(.ge, updatedAt, stamp)
            query.filter = filter.map { .binary(.and, $0, after) } ?? after
        }
        return query
    }

    /// Asks, once and without retries, the page that follows the next one: the `pageSize` rows after `cursor`
    /// from the `pageSize`-th on (`$skip`), so that its first row is the next page's last. nil on any failure:
    /// it is only a head start (see `pullPages`).
    func prefetch(_ table: TableName, filter: ODataExpression?, after cursor: PullCursor, pageSize: Int) async -> Page?
    {
        var query = Self.pageQuery(filter: filter, after: cursor, pageSize: pageSize)
        query.skip = pageSize - 1
        guard
            let response = try? await endpoint.send(
                "GET", endpoint.url(table, query: query.queryString(dialect: endpoint.wire.odata)),
                features: ["TQ", "OL", "IP", "HZ"]),
            response.status == 200, var page = Self.page(of: response, wire: endpoint.wire), !page.items.isEmpty
        else { return nil }
        page.isLast = !page.hasNextLink && page.items.count < pageSize
        page.scopeToken = response.header(Self.scopeHeader)  // a page under another scope is not used (pullPages)
        page.horizon = response.header(Self.horizonHeader).flatMap(WireDate.init(parsing:))  // nor one past the horizon
        return page
    }

    /// The protocol's default page size, remembered when a server refused `$top` and its page size
    /// could not be seen.
    static let protocolPageSize = 50

    /// Sends a page request until a reply that is not transient (a 200 whose body is not a page is),
    /// and returns it with its page, parsed once.
    private func sendPage(_ url: URL, _ features: [String], _ logger: Logger) async throws
        -> (response: HTTPResponseData, page: Page?)
    {
        var page: Page?
        let response = try await sendRetrying(logger: logger) {
            try await endpoint.send("GET", url, features: features)
        } isTransient: { response in
            page = response.status == 200 ? Self.page(of: response, wire: endpoint.wire) : nil
            return isTransientStatus(response.status) || (response.status == 200 && page == nil)
        }
        return (response, page)
    }

    /// The rows of a page body — a JSON array (v2), `{"results": […], "count": N}` (v2 with `$inlinecount`) or
    /// `{"items": […], "count": N, "nextLink": …}` (v3) — with the count and whether a next page is linked (a
    /// `Link` header, or a `nextLink` that is not null); nil when unreadable.
    static func page(of response: HTTPResponseData, wire: any WireDialect) -> Page? {
        let linked = response.header("Link") != nil
        let opening = response.body.first { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }
        if opening == UInt8(ascii: "[") {
            guard let elements = try? JSONValue.parseArrayElements(response.body, keeping: Self.pulledFields)
            else { return nil }
            return Page(items: elements, isLast: false, hasNextLink: linked)
        }
        guard
            let (elements, members) = try? JSONValue.parseObject(
                response.body, withElementsOf: wire.pageRows, keeping: Self.pulledFields),
            let elements
        else { return nil }
        let nextLink = members["nextLink"].map { $0 != .null } ?? false
        return Page(
            items: elements, isLast: false, totalCount: members["count"]?.intValue.map(Int.init),
            hasNextLink: linked || nextLink)
    }
}
