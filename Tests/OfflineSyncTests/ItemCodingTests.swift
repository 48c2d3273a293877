import Foundation
import Testing

@testable import OfflineSync

@Suite struct ItemCodingTests {
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
        let error = #expect(throws: DecodingError.self) {
            try ItemCoder.item(try JSONValue(parsing: json), as: Todo.self)
        }
        #expect("\(String(describing: error))".contains(field))
    }

    @Test func integersDecodeFromWholeDoublesButNotFractions() throws {
        struct Count: Codable { var n: Int }
        #expect(try ItemCoder.item(["n": 2.0], as: Count.self).n == 2)
        #expect(throws: DecodingError.self) { try ItemCoder.item(["n": 2.5], as: Count.self) }
    }
}
