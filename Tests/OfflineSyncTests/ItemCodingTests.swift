import Foundation
import Testing

@testable import OfflineSync

@Suite(.timeLimit(.minutes(3))) struct ItemCodingTests {
    struct Nested: Codable, Equatable {
        var tags: [String]
        var scores: [Int: Double]?
        var when: Date?
    }

    struct Rich: Codable, Equatable {
        var id: String
        var count: Int
        var big: Int64
        var ratio: Double
        var small: Float
        var flag: Bool
        var optional: String?
        var nested: Nested
        var list: [Nested]
        var raw: JSONValue
        var kind: Kind
        enum Kind: String, Codable { case a, b }
    }

    @Test func itemsRoundTripThroughJSONValueLikeThroughJSONText() throws {
        let date = WireDate(parsing: "2024-01-31T12:00:00.123Z")!.date
        let rich = Rich(
            id: "r1", count: 3, big: Int64.max, ratio: 0.1, small: 1.5, flag: true, optional: nil,
            nested: Nested(tags: ["x"], scores: nil, when: date), list: [Nested(tags: [], scores: nil, when: nil)],
            raw: ["k": [1, 2.5, .null]], kind: .b)
        let value = try ItemCoder.json(rich)
        #expect(value["when"] == nil)
        #expect(value["nested"]?["when"] == "2024-01-31T12:00:00.123Z")
        #expect(value["big"] == .int(Int64.max))
        #expect(try ItemCoder.item(value, as: Rich.self) == rich)
    }

    @Test(arguments: [
        (#"{"id":"a","text":5,"complete":false}"#, "text"),
        (#"{"id":"a","complete":false}"#, "text"),
        (#"{"id":"a","text":"t","complete":"yes"}"#, "complete"),
    ])
    func mismatchesNameTheField(json: String, field: String) throws {
        struct Todo: Codable { var id: String; var text: String; var complete: Bool }
        let error = #expect(throws: ItemDecodingError.self) {
            try ItemCoder.item(try JSONValue(parsing: json), as: Todo.self)
        }
        #expect(error?.field == field && error?.itemID == "a")
    }

    @Test func integersDecodeFromWholeDoublesButNotFractions() throws {
        struct Count: Codable { var n: Int }
        #expect(try ItemCoder.item(["n": 2.0], as: Count.self).n == 2)
        #expect(throws: ItemDecodingError.self) { try ItemCoder.item(["n": 2.5], as: Count.self) }
    }
}

/// An update through a typed model that knows fewer fields than the stored row (issue 33's finding: an older app
/// version, or a column another app added): the fields it does not know stay in the row (a v3 update replaces the
/// row on the server), the ones it knows and left nil go.
@Suite(.timeLimit(.minutes(3))) struct NarrowModelUpdateTests {
    struct Narrow: Codable, Sendable {
        var id: String
        var text: String
        var due: String?
        var version: String?
    }

    @Test func theStoredRowKeepsTheFieldsTheModelDoesNotKnowAndLosesTheOnesItCleared() async throws {
        let workspace = try Workspace()
        let client = SyncClient(
            url: URL(string: "http://127.0.0.1:9")!, store: try SQLiteLocalStore(path: workspace.path("s.sqlite")))
        try await client.syncTable("T").insert(["id": "a", "text": "one", "due": "monday", "note": "kept"])
        let table = try client.syncTable("T", of: Narrow.self)
        var item = try #require(try await table.item(id: ItemID("a")))
        item.text = "two"
        item.due = nil
        try await table.update(item)
        let row = try #require(try await client.syncTable("T").item(id: ItemID("a")))
        #expect(row["text"] == "two")
        #expect(row["note"] == "kept")
        #expect(row["due"] == nil)
    }

    @Test func anUntypedUpdateIsTheWholeRow() async throws {
        let workspace = try Workspace()
        let client = SyncClient(
            url: URL(string: "http://127.0.0.1:9")!, store: try SQLiteLocalStore(path: workspace.path("s.sqlite")))
        let table = try client.syncTable("T")
        try await table.insert(["id": "a", "text": "one", "note": "gone"])
        try await table.update(["id": "a", "text": "two"])
        #expect(try await table.item(id: ItemID("a"))?["note"] == nil)
    }

    @Test func theFieldsAModelKnowsAreThoseItReads() throws {
        let row: JSONValue = ["id": "a", "text": "one", "note": "x", "complete": true]
        #expect(ItemCoder.knownFields(of: Narrow.self, in: row) == ["id", "text", "due", "version"])
        #expect(ItemCoder.knownFields(of: JSONValue.self, in: row) == nil)
        #expect(ItemCoder.knownFields(of: [String: JSONValue].self, in: row) == nil)  // reads every key
        #expect(ItemCoder.knownFields(of: Narrow.self, in: ["id": "a"]) == nil)  // cannot decode the row
    }
}

/// A row that does not fit the app's type names itself and its field (issue 44, item 10).
@Suite(.timeLimit(.minutes(3))) struct ItemDecodingErrorTests {
    struct Todo: Codable {
        var id: String
        var text: String
        var complete: Bool
    }

    @Test func aRowThatDoesNotFitNamesTheRowAndTheField() throws {
        let table = try TableName("TodoItem")
        let cases: [(JSONValue, String, String)] = [
            (["id": "a1", "text": "milk", "complete": .null], "complete", "null where Bool is expected"),
            (["id": "a2", "text": "milk"], "complete", "absent"),
            (["id": "a3", "text": 5, "complete": true], "text", "not a String"),
        ]
        for (row, field, reason) in cases {
            let error = try #require(throws: ItemDecodingError.self) {
                try ItemCoder.item(row, as: Todo.self, in: table)
            }
            #expect(error.table == table && error.itemID == row["id"]?.stringValue && error.field == field)
            #expect(error.reason.contains(reason), "\(error)")
            #expect(error.localizedDescription.hasPrefix("Row '\(row["id"]?.stringValue ?? "")' of TodoItem"))
            #expect(error.localizedDescription.contains("field '\(field)'"), "\(error)")
        }
    }
}
