import Foundation
import PropertyBased
import SyncCore
import Testing

@Suite(.timeLimit(.minutes(3))) struct JSONValueTests {
    @Test(arguments: [
        ("1", JSONValue.int(1)),
        ("1.0", .double(1.0)),
        ("-0", .int(0)),
        ("9223372036854775807", .int(Int64.max)),
        ("-9223372036854775808", .int(Int64.min)),
        ("9223372036854775808", .double(9_223_372_036_854_775_808)),
        ("1e3", .double(1000)),
        ("0.1", .double(0.1)),
        ("1.7976931348623157e308", .double(.greatestFiniteMagnitude)),
        ("\"a\\u00e9\\ud83d\\ude00\\n\"", .string("aé😀\n")),
        ("[1, 2.5, \"x\", null, true]", .array([1, 2.5, "x", .null, true])),
        (" {\"b\": {\"c\": []}, \"a\": false} ", .object(["a": false, "b": ["c": []]])),
    ])
    func parsesEachKindExactly(text: String, expected: JSONValue) throws {
        #expect(try JSONValue(parsing: text) == expected)
    }

    @Test(arguments: [
        "", "01", "1.", ".5", "-", "1e", "tru", "nul", "[1,]", "{\"a\":1,}", "{a:1}", "\"\\x\"", "\"\u{1}\"",
        "\"\\ud800\"", "[1] 2", "1e999", "\"abc", "{\"a\" 1}",
    ])
    func refusesInvalidText(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
    }

    @Test func refusesNestingDeeperThanTheLimit() {
        let deep =
            String(repeating: "[", count: JSONValue.maximumDepth + 1)
            + String(repeating: "]", count: JSONValue.maximumDepth + 1)
        let error = #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
        #expect(error?.description.contains("nesting") == true)
    }

    /// Strings are equal and hash alike by their UTF-8 bytes, not by canonical equivalence (issue 63): `String`'s own
    /// comparison normalizes, which costs time quadratic in a run of combining marks not in canonical order.
    @Test func stringsAreEqualByTheirBytesNotByCanonicalEquivalence() {
        let composed = JSONValue.string("caf\u{E9}")
        let decomposed = JSONValue.string("cafe\u{301}")
        #expect("caf\u{E9}" == "cafe\u{301}")  // what String says
        #expect(composed != decomposed)
        #expect(composed == .string("caf\u{E9}"))
        #expect(Set([composed, decomposed, .string("caf\u{E9}")]).count == 2)
        // The same marks in the other order: another value, nested in arrays and objects too.
        let marks = "e" + String(repeating: "\u{301}\u{316}", count: 20)
        let swapped = "e" + String(repeating: "\u{316}\u{301}", count: 20)
        #expect(JSONValue.string(marks) != .string(swapped))
        #expect(JSONValue.array([.string(marks)]) != .array([.string(swapped)]))
        #expect(JSONValue.object(["text": .string(marks)]) != .object(["text": .string(swapped)]))
        #expect(JSONValue.object(["text": .string(marks), "n": 1]) == ["n": 1, "text": .string(marks)])
        // Every other kind compares as before: an integer is not a double, null only equals null.
        #expect(JSONValue.int(1) != .double(1))
        #expect(JSONValue.null != .string("null"))
        #expect(JSONValue.bool(true) == true)
        var hashes = Set<Int>()
        for value: JSONValue in [.null, false, 0, 0.0, "", [], [:]] { hashes.insert(value.hashValue) }
        #expect(hashes.count == 7)
    }

    @Test func serializesCompactlyWithSortedKeysAndEscapes() {
        let value: JSONValue = ["b": 1, "a": ["x\"y\\z\u{1}\n", 2.5, 1.0, .null, true]]
        #expect(value.serialized() == #"{"a":["x\"y\\z\u0001\n",2.5,1.0,null,true],"b":1}"#)
    }

    @Test func keepsIntegersAndDoublesApartThroughARoundTrip() throws {
        let value: JSONValue = ["i": 1, "d": 1.0, "big": .int(Int64.max), "tiny": .double(.leastNonzeroMagnitude)]
        let back = try JSONValue(parsing: value.serialized())
        #expect(back == value)
        #expect(back["d"] == .double(1.0))
        #expect(back["big"] == .int(Int64.max))
    }

    @Test func accessorsReadTheirOwnKindOnly() {
        let value: JSONValue = ["n": 2, "s": "x", "b": true]
        #expect(value["n"]?.intValue == 2)
        #expect(value["n"]?.doubleValue == 2.0)
        #expect(value["n"]?.stringValue == nil)
        #expect(value["s"]?.stringValue == "x")
        #expect(value["b"]?.boolValue == true)
        #expect(value["missing"] == nil)
        #expect(JSONValue.null.isNull)
    }

    @Test func decodesAndEncodesThroughCodable() throws {
        struct Wrapper: Codable, Equatable { var payload: JSONValue }
        let wrapper = Wrapper(payload: ["a": [1, "two", .null, false], "b": 2.5])
        let data = try JSONEncoder().encode(wrapper)
        #expect(try JSONDecoder().decode(Wrapper.self, from: data) == wrapper)
    }

    @Test func randomValuesSurviveSerializeThenParse() async {
        await propertyCheck(count: 300, input: JSONGenerators.value) { value in
            let parsed = try JSONValue(parsing: value.serialized())
            #expect(parsed == value)
        }
    }
}

/// Random JSON values for property tests.
enum JSONGenerators {
    static let value = Generator<JSONValue, Shrink.None<JSONValue>> { rng in
        make(depth: 0, using: &rng)
    }

    static func make(depth: Int, using rng: inout any SeededRandomNumberGenerator) -> JSONValue {
        switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: .min ... .max, using: &rng))
        case 3:
            let bits = UInt64.random(in: .min ... .max, using: &rng)
            let double = Double(bitPattern: bits)
            return .double(double.isFinite ? double : Double.random(in: -1e6...1e6, using: &rng))
        case 4: return .string(randomString(using: &rng))
        case 5: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in make(depth: depth + 1, using: &rng) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                members[randomString(using: &rng)] = make(depth: depth + 1, using: &rng)
            }
            return .object(members)
        }
    }

    static func randomString(using rng: inout any SeededRandomNumberGenerator) -> String {
        let alphabet: [Unicode.Scalar] = [
            "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\u{0}", "\u{1F}", "é", "😀", "'", "%",
        ]
        var string = ""
        for _ in 0..<Int.random(in: 0...8, using: &rng) {
            string.unicodeScalars.append(alphabet.randomElement(using: &rng)!)
        }
        return string
    }
}

@Suite(.timeLimit(.minutes(3))) struct JSONArrayElementTests {
    @Test func splitsAnArrayIntoElementsWithTheirExactText() throws {
        let text = #" [ {"b":1,"a":"x, y"} , 2.50 ,"s",[1,[2]] ] "#
        let elements = try JSONValue.parseArrayElements(Data(text.utf8))
        #expect(elements.map(\.text) == [#"{"b":1,"a":"x, y"}"#, "2.50", #""s""#, "[1,[2]]"])
        #expect(elements.map(\.value) == [["a": "x, y", "b": 1], 2.5, "s", [1, [2]]])
        #expect(try JSONValue.parseArrayElements(Data("[]".utf8)).isEmpty)
    }

    @Test(arguments: ["{}", "[1,]", "[1] x", "", "[1"])
    func refusesAnythingButOneArray(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parseArrayElements(Data(text.utf8)) }
    }
}

@Suite(.timeLimit(.minutes(3))) struct ShallowArrayParseTests {
    @Test func keepsOnlyTheNamedMembersButTheWholeText() throws {
        let text =
            #"[{"id":"a","text":"with \"quotes\" and \u00e9","n":[1,{"x":2}],"updatedAt":"2020-01-01T00:00:00.000Z","deleted":false}]"#
        let elements = try JSONValue.parseArrayElements(Data(text.utf8), keeping: ["id", "updatedAt", "deleted"])
        #expect(elements.count == 1)
        #expect(elements[0].value == ["id": "a", "updatedAt": "2020-01-01T00:00:00.000Z", "deleted": false])
        #expect(try JSONValue(parsing: elements[0].text)["text"] == "with \"quotes\" and é")
    }

    @Test(arguments: [
        #"[{"id":"a","text":"bad \q"}]"#, #"[{"id":"a","text":"open}]"#, #"[{"id":"a","n":01}]"#, "[{\"t\":\"\u{1}\"}]",
    ])
    func stillRefusesInvalidSkippedValues(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parseArrayElements(Data(text.utf8), keeping: ["id"]) }
    }
}
