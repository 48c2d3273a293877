import Foundation
import HTTPTypes
import HummingbirdTesting
import OfflineSyncTesting
import SyncCore
import SyncOData
import SyncSQL
import Testing

@testable import SyncServer

/// String order per column (issue 31): a case-insensitive, accent-aware collation in `$orderby` and the comparison
/// operators, the same on SQLite and PostgreSQL — tested against each other and against Swift on random Unicode
/// strings (seeded) — keys computed for rows written before the collation was set, and the settings checked.
@Suite(.timeLimit(.minutes(3))) struct CollationTests {
    static func movies(_ collation: Collation = .caseInsensitive) -> TableConfiguration {
        var table = Fixture.table("movies", pageSize: 1000, columns: ["title": .string, "year": .integer])
        table.collations = ["title": collation]
        return table
    }

    static let titles = ["American Beauty", "Amélie", "amadeus", "ABBA", "Æon Flux", "résumé", "resume", "Resumes"]

    @Test(arguments: Backend.all) func titlesSortAndCompareWithoutCaseThenAccents(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [Self.movies()]) {
            (client: any TestClientProtocol) async throws in
            for (index, title) in Self.titles.enumerated() {
                let reply = try await client.send(
                    .post, "/tables/movies", json: ["id": .string("m\(index)"), "title": .string(title)])
                #expect(reply.status == .created && reply.json?["__ck_title"] == nil)
            }
            func titles(_ query: String) async throws -> [String] {
                try await client.send(.get, "/tables/movies?\(query)").items.compactMap { $0["title"]?.stringValue }
            }
            #expect(
                try await titles("$orderby=title")
                    == ["ABBA", "amadeus", "Amélie", "American Beauty", "resume", "résumé", "Resumes", "Æon Flux"],
                "Æ has no decomposition: a letter of its own, after z")
            #expect(try await titles("$orderby=title%20desc").prefix(2) == ["Æon Flux", "Resumes"])
            #expect(try await titles("$filter=title%20eq%20'AMÉLIE'") == ["Amélie"])
            #expect(try await titles("$filter=title%20eq%20'amelie'") == [], "accents count")
            #expect(
                try await titles("$filter=title%20gt%20'am'%20and%20title%20lt%20'an'&$orderby=title") == [
                    "amadeus", "Amélie", "American Beauty",
                ])
            // Functions compare code points, as the collation's doc says.
            #expect(try await titles("$filter=startswith(title,'am')") == ["amadeus"])
            let page = try await client.send(.get, "/tables/movies?$filter=title%20eq%20'abba'")
            #expect(page.ids == ["m3"] && !page.text.contains("__ck"))
            #expect(try await client.send(.get, "/tables/movies?$orderby=__ck_title").status == .badRequest)
        }
    }

    /// 200 random strings of letters in both cases, accented and decomposed letters, ligatures, ß, Greek, Cyrillic,
    /// CJK and emoji (seeded): both stores give the order Swift gives by (key, id), for `$orderby` both ways, and
    /// the same rows for `lt`, `eq` and `ge` against strings drawn from the same pool.
    @Test(.enabled(if: TestDatabase.postgresURL != nil), arguments: [1, 2] as [UInt64])
    func bothStoresSortRandomUnicodeAlike(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let pool: [String] = [
            "a", "A", "b", "B", "e", "E", "é", "É", "e\u{301}", "è", "ê", "z", "Z", "ß", "SS", "ss", "ﬁ", "fi", "ø",
            "Ø", "æ", "ı", "İ", "i", "ω", "Ω", "ά", "ж", "Ж", "語", "日", "😀", "👍🏽", " ", "-", "1", "9", "\u{308}",
        ]
        func word() -> String {
            (0..<Int(random.next() % 6 + 1)).map { _ in pool[Int(random.next() % UInt64(pool.count))] }.joined()
        }
        let rows = (0..<200).map { (id: String(format: "r%03d", $0), title: word()) }
        let probes = (0..<4).map { _ in word() }
        let collation = Collation.caseInsensitive
        let expected = rows.sorted { (collation.key($0.title)!, $0.id) < (collation.key($1.title)!, $1.id) }.map(\.id)

        var answers: [Backend: [String: [String]]] = [:]
        for backend in Backend.all {
            answers[backend] = try await Fixture.withServer(backend, tables: [Self.movies()]) {
                (client: any TestClientProtocol) async throws in
                for row in rows {
                    let reply = try await client.send(
                        .post, "/tables/movies", json: ["id": .string(row.id), "title": .string(row.title)])
                    #expect(reply.status == .created)
                }
                var seen: [String: [String]] = [:]
                seen["asc"] = try await client.send(.get, "/tables/movies?$orderby=title,id&$top=1000").ids
                seen["desc"] = try await client.send(.get, "/tables/movies?$orderby=title%20desc,id%20desc&$top=1000")
                    .ids
                for (index, probe) in probes.enumerated() {
                    for op in ["lt", "eq", "ge"] {
                        let filter = ODataQuery.percentEncode(
                            "title \(op) '\(probe.replacingOccurrences(of: "'", with: "''"))'")
                        seen["\(op)\(index)"] = try await client.send(
                            .get, "/tables/movies?$filter=\(filter)&$orderby=id&$top=1000"
                        ).ids
                    }
                }
                return seen
            }
        }
        let sqlite = try #require(answers[.sqlite])
        let postgres = try #require(answers[.postgres])
        #expect(sqlite["asc"] == expected)
        #expect(sqlite["desc"] == expected.reversed())
        for (key, ids) in sqlite { #expect(postgres[key] == ids, "\(key)") }
        for (index, probe) in probes.enumerated() {
            let key = collation.key(probe)!
            let less = rows.filter { collation.key($0.title)! < key }.map(\.id).sorted()
            #expect(sqlite["lt\(index)"] == less, "lt '\(probe)'")
        }
    }

    /// A table whose rows were written while `title` was binary gets their keys when the server starts with the
    /// collation set (and a key gone stale — the collation set back to binary, a write, then set again — too).
    @Test(arguments: Backend.all) func rowsWrittenBeforeTheCollationGetTheirKeys(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            for (collation, titles) in [
                (Collation.caseInsensitive, ["b", "A"]), (.binary, ["C", "a2"]), (.caseInsensitive, [String]()),
            ] {
                let app = try await buildApplication(Fixture.configuration(database, tables: [Self.movies(collation)]))
                try await app.test(.router) { client in
                    for title in titles {
                        let reply = try await client.send(.post, "/tables/movies", json: ["title": .string(title)])
                        #expect(reply.status == .created)
                    }
                    if titles.isEmpty {
                        let ordered = try await client.send(.get, "/tables/movies?$orderby=title").items
                        #expect(ordered.compactMap { $0["title"]?.stringValue } == ["A", "a2", "b", "C"])
                    }
                }
            }
        }
    }

    @Test func collationsAreCheckedAtStartup() throws {
        var dynamic = Fixture.table("notes")
        dynamic.collation = .caseInsensitive
        #expect(throws: ConfigurationError("table 'notes': a collation needs declared columns")) {
            try dynamic.validate()
        }
        var wrongColumn = Self.movies()
        wrongColumn.collations = ["year": .caseInsensitive]
        #expect(throws: ConfigurationError.self) { try wrongColumn.validate() }

        let file = try ConfigurationFile(
            document: try JSONValue(
                parsing:
                    #"{"tables": [{"name": "movies", "columns": {"title": "string"}, "collation": "caseInsensitive"}]}"#
            ))
        #expect(file.tables.first?.collation(of: "title") == .caseInsensitive)
        #expect(throws: ConfigurationError.self) {
            try ConfigurationFile(
                document: try JSONValue(
                    parsing: #"{"tables": [{"name": "m", "columns": {"t": "string"}, "collations": {"t": "fancy"}}]}"#))
        }
    }
}
