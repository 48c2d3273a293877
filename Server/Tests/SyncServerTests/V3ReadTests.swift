import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// Reads in the Datasync dialect (`ZUMO-API-VERSION: 3.0.x`, PROTOCOL-v3.md §2–§5), on the same tables as v2 and
/// on both stores: rows written through v2 read through v3 without `createdAt`; a tombstone is 410; `ETag`,
/// `Last-Modified` and the conditional requests; pages as `{"items","count","nextLink"}` following `nextLink`;
/// OData v4 forms, exact `$select`, names in any case.
@Suite(.timeLimit(.minutes(3))) struct V3ReadTests {
    static let v3: HTTPFields = [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"]

    /// A server whose TodoItem pages hold 3 rows, with rows r1…r7 written through v2 (r7 then deleted).
    func withRows(_ backend: Backend, _ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let table = Fixture.table("TodoItem", pageSize: 3)
        try await Fixture.withServer(backend, tables: [table]) { client in
            for index in 1...7 {
                let row: JSONValue = [
                    "id": .string("r\(index)"), "text": .string("item \(index)"), "rank": .int(Int64(index)),
                ]
                #expect(try await client.send(.post, "/tables/TodoItem", json: row).status == .created)
            }
            #expect(try await client.send(.delete, "/tables/TodoItem/r7").status == .ok)
            try await body(client)
        }
    }

    func get(_ client: any TestClientProtocol, _ uri: String, _ headers: HTTPFields = [:]) async throws -> Reply {
        var all = Self.v3
        for field in headers { all.append(field) }
        return try await client.send(.get, uri, headers: all, versioned: false)
    }

    @Test(arguments: Backend.all) func anItemReadsWithoutCreatedAtAndATombstoneIsGone(_ backend: Backend) async throws {
        try await withRows(backend) { client in
            let item = try await get(client, "/tables/TodoItem/r1")
            #expect(item.status == .ok)
            #expect(item.json?["text"] == "item 1")
            #expect(item.json?["createdAt"] == nil)
            #expect(item.json?["updatedAt"] != nil && item.json?["version"] != nil)
            let version = try #require(item.json?["version"]?.stringValue)
            #expect(item["ETag"] == "\"\(version)\"")
            let lastModified = try #require(item["Last-Modified"])
            #expect(lastModified.hasSuffix(" GMT"))

            let gone = try await get(client, "/tables/TodoItem/r7")
            #expect(gone.status == .gone)
            let tombstone = try await get(client, "/tables/TodoItem/r7?__includedeleted=true")
            #expect(tombstone.status == .ok)
            #expect(tombstone.json?["deleted"] == true)
            #expect(try await get(client, "/tables/TodoItem/missing").status == .notFound)
            // v2 still answers 404 for the tombstone and shows createdAt.
            #expect(try await client.send(.get, "/tables/TodoItem/r7").status == .notFound)
            #expect(try await client.send(.get, "/tables/TodoItem/r1").json?["createdAt"] != nil)
        }
    }

    @Test(arguments: Backend.all) func conditionalReads(_ backend: Backend) async throws {
        try await withRows(backend) { client in
            let item = try await get(client, "/tables/TodoItem/r2")
            let tag = try #require(item["ETag"])
            let lastModified = try #require(item["Last-Modified"])
            func status(_ name: String, _ value: String) async throws -> HTTPResponse.Status {
                try await get(client, "/tables/TodoItem/r2", [HTTPField.Name(name)!: value]).status
            }
            #expect(try await status("If-None-Match", tag) == .notModified)
            #expect(try await status("If-None-Match", "*") == .notModified)
            #expect(try await status("If-None-Match", "\"other\"") == .ok)
            #expect(try await status("If-Match", tag) == .ok)
            #expect(try await status("If-Match", "\"other\", \(tag)") == .ok)
            #expect(try await status("If-Match", "W/\(tag)") == .preconditionFailed)  // weak tags never match
            let failed = try await get(client, "/tables/TodoItem/r2", [.ifMatch: "\"other\""])
            #expect(failed.status == .preconditionFailed)
            #expect(failed.json?["id"] == "r2")  // the item comes with it
            #expect(failed["ETag"] == tag)
            // The date the client got, sent back: not modified since, unmodified since.
            #expect(try await status("If-Modified-Since", lastModified) == .notModified)
            #expect(try await status("If-Unmodified-Since", lastModified) == .ok)
            #expect(try await status("If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT") == .ok)
            #expect(try await status("If-Unmodified-Since", "Sat, 01 Jan 2000 00:00:00 GMT") == .preconditionFailed)
        }
    }

    @Test(arguments: Backend.all) func pagesFollowNextLinkAndCount(_ backend: Backend) async throws {
        try await withRows(backend) { client in
            var uri = "/tables/TodoItem?$count=true&$orderby=rank"
            var pages: [[String]] = []
            var counts: [JSONValue?] = []
            while true {
                let page = try await get(client, uri)
                #expect(page.status == .ok)
                pages.append(page.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
                counts.append(page.json?["count"])
                #expect(page["Link"] == nil)
                guard let next = page.json?["nextLink"]?.stringValue else {
                    #expect(page.json?["nextLink"] == .null)
                    break
                }
                #expect(!next.hasPrefix("?") && !next.hasPrefix("http"))
                uri = "/tables/TodoItem?" + next
                if pages.count > 5 { break }
            }
            #expect(pages == [["r1", "r2", "r3"], ["r4", "r5", "r6"]])
            #expect(counts == [6, 6])
            // $top caps the whole chain: 4 rows, in pages of 3 and 1.
            let first = try await get(client, "/tables/TodoItem?$top=4&$orderby=rank")
            #expect(first.json?["count"] == .null)
            let next = try #require(first.json?["nextLink"]?.stringValue)
            let second = try await get(client, "/tables/TodoItem?" + next)
            #expect(second.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["r4"])
            #expect(second.json?["nextLink"] == .null)
            // Tombstones with __includedeleted; none without.
            let all = try await get(client, "/tables/TodoItem?$filter=id%20eq%20'r7'&__includedeleted=true")
            #expect(all.json?["items"]?.arrayValue?.count == 1)
            let live = try await get(client, "/tables/TodoItem?$filter=id%20eq%20'r7'")
            #expect(live.json?["items"]?.arrayValue?.isEmpty == true)
        }
    }

    @Test(arguments: Backend.all) func v4FormsExactSelectAndNamesInAnyCase(_ backend: Backend) async throws {
        try await withRows(backend) { client in
            func ids(_ query: String) async throws -> [String]? {
                let page = try await get(client, "/tables/TodoItem?" + query)
                return page.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
            }
            #expect(try await ids("$filter=Rank%20in%20(2,4)&$orderby=ID%20desc") == ["r4", "r2"])
            #expect(
                try await ids(
                    "$filter=UpdatedAt%20gt%20cast(2000-01-01T00:00:00.000Z,Edm.DateTimeOffset)&$top=2&$orderby=rank")
                    == ["r1", "r2"])
            #expect(try await ids("$filter=contains(text,'5')&$inlinecount=allpages&$apply=x") == ["r5"])
            let selected = try await get(client, "/tables/TodoItem?$select=text,Id&$filter=rank%20eq%201")
            #expect(selected.json?["items"] == [["id": "r1", "text": "item 1"]])
            for refused in [
                "$filter=substringof('1',text)", "$filter=updatedAt%20gt%20datetimeoffset'2000-01-01T00:00:00Z'",
                "$filter=createdAt%20gt%20cast(2000-01-01T00:00:00Z,Edm.DateTimeOffset)", "$select=createdAt",
                "$filter=nope%20eq%201", "$top=-1",
            ] {
                let reply = try await get(client, "/tables/TodoItem?" + refused)
                #expect(reply.status == .badRequest, "\(refused)")
                #expect(reply.error != nil)
            }
            // The version as a query parameter wins over the header (PROTOCOL-v3.md §2).
            let v2 = try await get(client, "/tables/TodoItem?ZUMO-API-VERSION=2.0.0&$filter=rank%20eq%201")
            #expect(v2.json?.arrayValue?.count == 1)
        }
    }

    /// OData v4's unquoted date, date-and-time and GUID literals in a v3 `$filter` (issue 28, point 3), on a date
    /// column and on ids; v2 refuses them as before.
    @Test(arguments: Backend.all) func v4UnquotedLiteralsFilterDatesAndIDs(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [Fixture.table("Events")]) { client in
            let rows: [(String, String)] = [
                ("0e8e6f2c-6b1c-4e3e-9a55-2f1f7f0c0001", "2021-12-31T23:59:59.999Z"),
                ("0e8e6f2c-6b1c-4e3e-9a55-2f1f7f0c0002", "2022-01-01T00:00:00.000Z"),
                ("0e8e6f2c-6b1c-4e3e-9a55-2f1f7f0c0003", "2022-01-01T12:30:00.000Z"),
            ]
            for (id, stamp) in rows {
                let row: JSONValue = ["id": .string(id), "stamp": .string(stamp)]
                #expect(try await client.send(.post, "/tables/Events", json: row).status == .created)
            }
            func ids(_ filter: String) async throws -> [String]? {
                let page = try await get(client, "/tables/Events?$orderby=stamp&$filter=" + filter)
                #expect(page.status == .ok, "\(filter): \(page.text)")
                return page.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue?.suffix(1) }.map(String.init)
            }
            #expect(try await ids("stamp%20lt%202022-01-01T00:00:00Z") == ["1"])
            #expect(try await ids("stamp%20ge%202022-01-01") == ["2", "3"])
            #expect(try await ids("stamp%20eq%202022-01-01T13:30%2B01:00") == ["3"])
            #expect(try await ids("stamp%20gt%202022-01-01T00:00:00.0000001Z%20and%20stamp%20lt%202023-01-01") == ["3"])
            #expect(try await ids("id%20eq%200e8e6f2c-6b1c-4e3e-9a55-2f1f7f0c0002") == ["2"])
            let time = try await get(client, "/tables/Events?$filter=stamp%20eq%2012:30:00")
            #expect(time.status == .badRequest)
            #expect(time.error?.contains("TimeOfDay literals such as 12:30:00 are not supported") == true)
            let v2 = try await client.send(.get, "/tables/Events?$filter=stamp%20lt%202022-01-01T00:00:00Z")
            #expect(v2.status == .badRequest)
            #expect(v2.error?.contains("unexpected token '-'") == true)
        }
    }
}
