import Foundation
import OfflineSync
import Testing

@testable import OfflineSync

/// ``SyncContext/page(of:wire:)``: the three page bodies a pull meets, and how each says a next page exists.
@Suite(.timeLimit(.minutes(3))) struct PageParsingTests {
    static func page(_ body: String, headers: [String: String] = [:], _ dialect: SyncClient.ProtocolVersion)
        -> PullRunner.Page?
    {
        PullRunner.page(of: HTTPResponseData(status: 200, headers: headers, body: Data(body.utf8)), wire: dialect.wire)
    }

    static let row = #"{"id":"a","updatedAt":"2026-01-01T00:00:00.000Z","version":"v1","text":"x \"y\""}"#

    @Test func v2PagesAreArraysOrResultsWithACountAndLinkByHeader() throws {
        let plain = try #require(Self.page("[\(Self.row)]", .v2))
        #expect(plain.items.map(\.text) == [Self.row])  // stored as it came
        #expect(plain.items.first?.value["text"] == nil)  // only the fields a pull reads are built
        #expect(!plain.hasNextLink && plain.totalCount == nil)
        let linked = try #require(Self.page(" [ ] ", headers: ["Link": "<http://h/tables/t?$skip=50>; rel=next"], .v2))
        #expect(linked.items.isEmpty && linked.hasNextLink)
        let counted = try #require(Self.page(#"{"results":[\#(Self.row)],"count":7}"#, .v2))
        #expect(counted.items.map(\.text) == [Self.row] && counted.totalCount == 7 && !counted.hasNextLink)
    }

    /// PROTOCOL-v3.md §4–5: `{"items","count","nextLink"}`, the link as the toolkit's query string, v6's absolute
    /// URL or its path — any of them says a next page exists; null or absent says none. A pull asks that page by
    /// its cursor, not by the link's offset.
    @Test(arguments: [
        #""$count=true&$skip=100&$top=25""#, #""https://h.example/tables/movies?$skip=100""#,
        #""/tables/movies?$skip=100""#,
    ])
    func v3PagesLinkByNextLinkInEachForm(link: String) throws {
        let page = try #require(Self.page(#"{"items":[\#(Self.row)],"count":120,"nextLink":\#(link)}"#, .v3))
        #expect(page.items.map(\.text) == [Self.row] && page.totalCount == 120 && page.hasNextLink)
        for last in [#"{"nextLink":null,"items":[],"count":null}"#, #"{"items":[]}"#] {
            let page = try #require(Self.page(last, .v3))
            #expect(page.items.isEmpty && !page.hasNextLink && page.totalCount == nil)
        }
    }

    @Test(arguments: [#"{"items":[{"id":"a"}"#, #"{"value":[]}"#, #""text""#, "", #"{"items":{}}"#])
    func unreadablePagesAreNil(body: String) {
        #expect(Self.page(body, .v3) == nil)
    }
}
