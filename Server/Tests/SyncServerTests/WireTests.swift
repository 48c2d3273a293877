import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SyncCore
import SyncOData
import SyncSQL
import Testing

@testable import SyncServer

/// The dialects' wires cell by cell, with no server and no store: each method of each dialect read into the table
/// service's values, and each result turned into a response. Covers v2's PATCH (precondition by `If-Match` or body
/// `version`), DELETE and undelete, PUT (not a v2 route); v3's PUT (a replace with its conditions as data), DELETE
/// (204), PATCH and POST on an item (405 with `Allow`), ids a v3 client can hold, a v3 read's 304 and 412; both
/// dialects' pages and their next links; HTTP dates.
@Suite(.timeLimit(.minutes(1))) struct WireTests {
    static let v2 = V2TableWire()
    static let v3 = V3TableWire()

    func schema(integerIDs: Bool = false) throws -> TableSchema {
        var configuration = try TableConfiguration(name: "TodoItem")
        configuration.integerIDs = integerIDs
        return TableSchema(configuration: configuration, columns: ["text": .string])
    }

    func head(_ method: HTTPRequest.Method, _ path: String = "/tables/TodoItem/a", _ fields: HTTPFields = [:])
        -> HTTPRequest
    {
        var head = HTTPRequest(method: method, scheme: nil, authority: "example.com", path: path)
        head.headerFields = fields
        return head
    }

    func status(_ body: () throws -> Void) -> Int? {
        do {
            try body()
            return nil
        } catch let error as APIError {
            return error.status.code
        } catch let error as HTTPError {
            return error.status.code
        } catch {
            return -1
        }
    }

    @Test func aV2PatchReadsAsAChangeWithItsPrecondition() throws {
        let id = try ItemID("a")
        let body: [String: JSONValue] = ["id": "a", "text": "x", "deleted": true, "version": "v1"]
        let byBody = try Self.v2.itemWrite(.change, id: id, head: head(.patch), body: body, try schema())
        guard case .change(let fields) = byBody.action else { Issue.record("not a change"); return }
        #expect(fields["deleted"] == nil && fields["id"] == nil && fields["text"] == "x")
        #expect(byBody.precondition == .version(Version("v1")))
        #expect(byBody.conflictAnswer.status == .conflict)  // a body version fails as 409
        let byHeader = try Self.v2.itemWrite(
            .change, id: id, head: head(.patch, "/tables/TodoItem/a?__includeDeleted=true", [.ifMatch: "\"v2\""]),
            body: body, try schema())
        #expect(byHeader.precondition == .version(Version("v2")))
        #expect(byHeader.conflictAnswer.status == .preconditionFailed)  // If-Match wins, as 412
        #expect(byHeader.includeDeleted)
        #expect(byHeader.effect == .change && byHeader.storedCheck == nil)
        let none = try V2TableWire.change(id: id, body: ["text": "x"], ifMatch: nil, includeDeleted: false)
        #expect(none.precondition == nil)
        #expect(
            status { _ = try V2TableWire.change(id: id, body: ["version": 3], ifMatch: nil, includeDeleted: false) }
                == 400)
        // The body's id must be the URL's, compared as bytes.
        #expect(
            status { _ = try Self.v2.itemWrite(.change, id: id, head: head(.patch), body: ["id": "b"], try schema()) }
                == 400)
    }

    @Test func v2MethodsOnAnItem() throws {
        #expect(try Self.v2.itemEffect(.patch) == .change)
        #expect(try Self.v2.itemEffect(.delete) == .delete)
        #expect(try Self.v2.itemEffect(.post) == .undelete)
        #expect(status { _ = try Self.v2.itemEffect(.put) } == 404)  // answered 405 by MethodNotAllowedMiddleware
        let delete = try Self.v2.itemWrite(
            .delete, id: try ItemID("a"), head: head(.delete, "/tables/TodoItem/a", [.ifMatch: "\"v1\""]), body: nil,
            try schema())
        #expect(delete.effect == .delete && delete.precondition == .version(Version("v1")))
        let undelete = try Self.v2.itemWrite(.undelete, id: try ItemID("a"), head: head(.post), body: nil, try schema())
        #expect(undelete.effect == .undelete && undelete.precondition == nil)
        #expect(
            status {
                _ = try Self.v2.itemWrite(
                    .delete, id: try ItemID("a"), head: head(.delete, "/t/a", [.ifMatch: "W/\"v1\""]), body: nil,
                    try schema())
            } == 400)
        #expect(Self.v2.written(.delete, ["id": "a", "deleted": true]).status == .ok)
    }

    @Test func v3MethodsOnAnItem() throws {
        #expect(try Self.v3.itemEffect(.put) == .change)
        #expect(try Self.v3.itemEffect(.delete) == .delete)
        for method in [HTTPRequest.Method.patch, .post] {
            do {
                _ = try Self.v3.itemEffect(method)
                Issue.record("\(method) is a v3 route")
            } catch let error as APIError {
                #expect(error.status == .methodNotAllowed && error.headers[.allow] == "GET, PUT, DELETE")
            }
        }
        let fields: HTTPFields = [
            .ifMatch: "\"v1\"", .ifNoneMatch: "*", .ifModifiedSince: "Sun, 06 Nov 1994 08:49:37 GMT",
            .ifUnmodifiedSince: "not a date",
        ]
        let put = try Self.v3.itemWrite(
            .change, id: try ItemID("a"), head: head(.put, "/tables/TodoItem/a?__includedeleted=true", fields),
            body: ["text": "x", "deleted": true, "version": "v9"], try schema())
        guard case .replace(let replaced) = put.action else { Issue.record("not a replace"); return }
        #expect(replaced["deleted"] == true && replaced["text"] == "x")
        #expect(put.precondition == nil)  // a body version is no precondition under v3; the stored check decides
        #expect(put.includeDeleted)
        #expect(
            put.storedCheck
                == ItemConditions(
                    ifMatch: "\"v1\"", ifNoneMatch: "*", ifModifiedSince: Date(timeIntervalSince1970: 784_111_777)))
        #expect(put.shown(["id": "a", "createdAt": "2026-01-01T00:00:00.000Z"]) == ["id": "a"])
        let delete = try Self.v3.itemWrite(.delete, id: try ItemID("a"), head: head(.delete), body: nil, try schema())
        #expect(delete.effect == .delete && delete.storedCheck == ItemConditions() && !delete.includeDeleted)
        #expect(Self.v3.written(.delete, ["id": "a"]).status == .noContent)
        #expect(Self.v3.written(.change, ["id": "a"]).status == .ok)
    }

    @Test func insertsOfBothDialects() throws {
        let given = try Self.v2.insert(["id": "a", "text": "x"], try schema())
        #expect(given.id?.rawValue == "a" && given.effect == .insert)
        #expect(try Self.v2.insert(["text": "x"], try schema()).id == nil)  // the service makes one
        #expect(try Self.v2.insert(["id": 0], try schema(integerIDs: true)).id == nil)
        #expect(status { _ = try Self.v2.insert(["id": 7], try schema(integerIDs: true)) } == 400)
        #expect(status { _ = try Self.v2.insert(["id": 7], try schema()) } == 400)
        #expect(status { _ = try Self.v2.insert(["version": [:]], try schema()) } == 400)
        #expect(try Self.v2.insert(["id": "a b"], try schema()).id?.rawValue == "a b")
        #expect(status { _ = try Self.v3.insert(["id": "a b"], try schema()) } == 400)  // not an id v3 clients hold
        #expect(
            Self.v3.inserted(["id": "a", "createdAt": "x"], location: "http://h/tables/t/a").headers[.location]
                == "http://h/tables/t/a")
    }

    @Test func aV3ReadWeighsItsConditions() throws {
        let item: JSONValue = ["id": "a", "version": "v1", "updatedAt": "1994-11-06T08:49:37.250Z", "createdAt": "x"]
        func answer(_ fields: HTTPFields) throws -> Response {
            try Self.v3.item(item, try Self.v3.itemRead(head(.get, "/tables/TodoItem/a", fields)))
        }
        let plain = try answer([:])
        #expect(plain.status == .ok && plain.headers[.lastModified] == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(try answer([.ifNoneMatch: "\"v1\""]).status == .notModified)
        #expect(try answer([.ifModifiedSince: "Sun, 06 Nov 1994 08:49:37 GMT"]).status == .notModified)
        #expect(try answer([.ifModifiedSince: "Sun, 06 Nov 1994 08:49:36 GMT"]).status == .ok)
        #expect(status { _ = try answer([.ifMatch: "\"v2\""]) } == 412)
        #expect(status { _ = try answer([.ifUnmodifiedSince: "Sun, 06 Nov 1994 08:49:36 GMT"]) } == 412)
        #expect(try answer([.ifMatch: "W/\"v1\", \"v1\""]).status == .ok)
    }

    @Test func pagesAndTheirNextLinks() async throws {
        let links = LinkBuilder(origin: "https://example.com", path: "/tables/TodoItem", versionParameter: "2.0.0")
        let page = QueryPage(itemsJSON: Array(#"[{"id":"a"}]"#.utf8), itemCount: 1, hasMore: true, totalCount: 5)
        let query = try ODataQuery(parsing: "$top=3&$filter=text%20eq%20'x'")
        let v2 = Self.v2.page(page, query: query, links: links)
        #expect(
            v2.headers[HTTPField.Name("Link")!]
                == "https://example.com/tables/TodoItem?$filter=(text%20eq%20'x')&$skip=1&$top=2&ZUMO-API-VERSION=2.0.0; rel=next"
        )
        let v3 = Self.v3.page(page, query: try ODataQuery(parsing: "$top=3", dialect: .v3), links: links)
        let body = try JSONValue(parsing: Data(try await v3.collectedBody().readableBytesView))
        #expect(body["nextLink"] == "$skip=1&$top=2" && body["count"] == 5 && body["items"]?.arrayValue?.count == 1)
        let last = QueryPage(itemsJSON: Array("[]".utf8), itemCount: 0, hasMore: false, totalCount: nil)
        #expect(Self.v2.page(last, query: query, links: links).headers[HTTPField.Name("Link")!] == nil)
    }

    @Test func httpDatesAreWrittenAndReadWithoutAFormatter() {
        let date = Date(timeIntervalSince1970: 784_111_777.9)
        #expect(HTTPDate.string(date) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.date("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(HTTPDate.string(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.string(Date(timeIntervalSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.date("Tue, 29 Feb 2000 00:00:00 GMT") == Date(timeIntervalSince1970: 951_782_400))
        for text in [
            "Mon, 29 Feb 2100 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "", "Sun, 06 Xyz 1994 08:49:37 GMT",
        ] {
            #expect(HTTPDate.date(text) == nil, "\(text)")
        }
        // Every day of four centuries goes there and back.
        for day in stride(from: Int64(-146_097), to: 146_097 * 3, by: 37) {
            let date = Date(timeIntervalSince1970: Double(day * 86_400 + 45_296))
            #expect(HTTPDate.date(HTTPDate.string(date)) == date)
        }
    }
}
