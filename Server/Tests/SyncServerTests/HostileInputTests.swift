import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import SyncOData
import SyncServer
import Testing

/// Client text the server must read in linear time and answer correctly (issue 44, items 1–4): member names that are
/// not ASCII and strings of long runs of combining marks are refused before anything hashes them; pattern functions
/// escape per Unicode scalar; arithmetic on a bare `null` is the same 200 on both stores.
@Suite(.timeLimit(.minutes(3))) struct HostileInputTests {
    /// `"a"` and `count` combining marks whose classes alternate (230, 220): normalizing it reorders every pair.
    static func marks(_ count: Int) -> String {
        "a" + String(String.UnicodeScalarView((0..<count).map { $0.isMultiple(of: 2) ? "\u{0301}" : "\u{0316}" }))
    }

    static func filter(_ text: String) -> String { "$filter=" + ODataQuery.percentEncode(text) }

    @Test(arguments: Backend.all) func aMemberNameThatIsNotASCIIIsRefusedBeforeItIsHashed(_ backend: Backend)
        async throws
    {
        try await Fixture.withServer(backend, tables: [Fixture.table("notes")]) { client in
            // A batch that names no operation was answered 200 once its parse was done (a minute for a 1 MB name).
            for (marks, refusal) in [(100, "member name that is not ASCII"), (500_000, "longer than 255 bytes")] {
                let batch = "{\"requests\": [], \"\(Self.marks(marks))\": 1}"
                let refused = try await client.send(.post, "/batch", body: batch)
                #expect(refused.status == .badRequest)
                #expect(refused.error?.contains(refusal) == true, "\(refused.text)")
            }
            let nested = try await client.send(.post, "/tables/notes", body: #"{"id": "n", "x": {"é": 1}}"#)
            #expect(nested.status == .badRequest)
            let long = "{\"id\": \"n\", \"x\": {\"\(String(repeating: "k", count: 256))\": 1}}"
            #expect(try await client.send(.post, "/tables/notes", body: long).error?.contains("255 bytes") == true)
            // ASCII names of nested objects are taken, up to 255 bytes.
            let fine = "{\"id\": \"n\", \"x\": {\"\(String(repeating: "k", count: 255))\": 1}}"
            #expect(try await client.send(.post, "/tables/notes", body: fine).status == .created)
        }
    }

    @Test(arguments: Backend.all) func aStringWithALongRunOfCombiningMarksIsRefused(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [Fixture.table("notes")]) { client in
            let refused = try await client.send(
                .post, "/tables/notes",
                json: ["id": "a", "text": .string(Self.marks(ClientText.maximumNonStarterRun + 1))])
            #expect(refused.status == .badRequest)
            #expect(refused.error?.contains("combining marks in a row") == true, "\(refused.text)")
            // Thirty in a row (Unicode's stream-safe limit), and real text with marks, are stored as sent.
            let thirty = Self.marks(ClientText.maximumNonStarterRun)
            for (id, text) in [("b", thirty), ("c", "Ελληνικά, français, हिन्दी, 한국어 🇫🇷")] {
                let stored = try await client.send(
                    .post, "/tables/notes", json: ["id": .string(id), "text": .string(text)])
                #expect(stored.status == .created)
                #expect(stored.json?["text"]?.stringValue.map { Array($0.utf8) == Array(text.utf8) } == true)
            }
        }
    }

    @Test func aURLOrHeaderWithALongRunOfCombiningMarksIsRefusedBeforeAnyRouteReadsIt() async throws {
        try await Fixture.withServer(.sqlite, tables: [Fixture.table("notes")]) { client in
            _ = try await client.send(.post, "/tables/notes", json: ["id": "n", "text": "x"])
            let long = Self.marks(ClientText.maximumNonStarterRun + 1)
            for uri in [
                "/tables/notes?" + Self.filter("text eq '\(long)'"),
                "/tables/notes?$select=" + ODataQuery.percentEncode(long),
                "/tables/notes/" + ODataQuery.percentEncode(long), "/tables/notes?x=" + ODataQuery.percentEncode(long),
            ] {
                let reply = try await client.send(.get, uri)
                #expect(reply.status == .badRequest, "\(uri.prefix(40)): \(reply.text)")
                #expect(reply.error?.contains("combining marks in a row") == true, "\(reply.text)")
            }
            let ifMatch = try await client.send(
                .patch, "/tables/notes/n", json: ["text": "y"], headers: [.ifMatch: Self.marks(8_000)])
            #expect(
                ifMatch.status == .badRequest && ifMatch.error?.contains("If-Match header") == true, "\(ifMatch.text)")
            let thirty = Self.marks(ClientText.maximumNonStarterRun)
            let fine = try await client.send(.get, "/tables/notes?" + Self.filter("text eq '\(thirty)'"))
            #expect(fine.status == .ok, "\(fine.text)")
        }
    }

    @Test func aTokenThatIsNotASCIIIsRefusedBeforeItIsSplit() async throws {
        try await Fixture.withServer(.sqlite, tables: [Fixture.table("notes")], configure: { $0.auth = AuthTests.auth })
        {
            client in
            for field in [HTTPField.Name.authorization, HTTPField.Name("X-ZUMO-AUTH")!] {
                // Stream-safe (a longer run of marks is refused before, as any header's), but not ASCII.
                let value = (field == .authorization ? "Bearer " : "") + String(repeating: "e\u{0301}", count: 4_000)
                let reply = try await client.send(.get, "/tables/notes", headers: [field: value])
                #expect(
                    reply.status == .unauthorized && reply.error?.contains("a token is ASCII") == true, "\(reply.text)")
            }
        }
    }

    @Test(arguments: Backend.all) func patternFunctionsEscapeEachScalar(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [Fixture.table("notes")]) { client in
            for (id, body) in [("mark", "x\u{0301}y"), ("star", "x*\u{0301}y"), ("percent", "x%\u{0301}y")] {
                _ = try await client.send(.post, "/tables/notes", json: ["id": .string(id), "body": .string(body)])
            }
            func ids(_ filter: String) async throws -> [String] {
                let reply = try await client.send(.get, "/tables/notes?" + Self.filter(filter) + "&$orderby=id")
                #expect(reply.status == .ok, "\(filter): \(reply.text)")
                return reply.ids
            }
            // A wildcard followed by a combining mark is one grapheme, but the database reads scalars: escaped, it
            // is the character itself, never "anything".
            #expect(try await ids("contains(body,'*\u{0301}')") == ["star"])
            #expect(try await ids("contains(body,'%\u{0301}')") == ["percent"])
            #expect(try await ids("contains(body,'?\u{0301}')") == [])
            #expect(try await ids("contains(body,'_\u{0301}')") == [])
            // A backslash after a prepended mark (U+0600 joins the next character's grapheme) is escaped too.
            #expect(try await ids("endswith(body,'\u{0600}\\')") == [])
            #expect(try await ids("startswith(body,'[\u{0301}')") == [])
        }
    }

    @Test(arguments: Backend.all) func arithmeticOnABareNullIsNull(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [Fixture.table("notes")]) { client in
            _ = try await client.send(.post, "/tables/notes", json: ["id": "a", "n": 1])
            for (filter, ids) in [
                ("-null eq 1", []), ("null add null eq 1", []), ("null mul 2 eq null", ["a"]),
                ("1 sub null eq null", ["a"]), ("-null eq null", ["a"]),
            ] as [(String, [String])] {
                let reply = try await client.send(.get, "/tables/notes?" + Self.filter(filter))
                #expect(reply.status == .ok, "\(filter): \(reply.text)")
                #expect(reply.ids == ids, "\(filter): arithmetic on null is null, which only `eq null` matches")
            }
        }
    }
}
