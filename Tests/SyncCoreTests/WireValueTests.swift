import Foundation
import SyncCore
import Testing

@Suite(.timeLimit(.minutes(3))) struct ItemIDTests {
    @Test(arguments: [
        "a", "5e2f8c1a-0c1b-4a4e-9f0e-2d1f6a7b8c9d", "A B", "é", "...", String(repeating: "x", count: 255), " a ",
    ])
    func acceptsValidIDs(text: String) throws {
        #expect(try ItemID(text).rawValue == text)
    }

    @Test(arguments: [
        ("", "it is empty"),
        (String(repeating: "x", count: 256), "it is longer than 255 characters"),
        (".", "it is '.' or '..'"),
        ("..", "it is '.' or '..'"),
        ("   ", "it is only white space"),
        ("a+b", "it contains '+'"),
        ("a?b", "it contains '?'"),
        ("a`b", "it contains '`'"),
        ("a\"b", "it contains '\"'"),
        ("a/b", "it contains '/'"),
        ("a\\b", "it contains '\\'"),
        ("a\u{0}b", "it contains a control character"),
        ("a\u{1F}b", "it contains a control character"),
        ("a\u{7F}b", "it contains a control character"),
        ("a\u{9F}b", "it contains a control character"),
    ])
    func refusesInvalidIDsSayingWhy(text: String, reason: String) {
        let error = #expect(throws: ValueError.self) { try ItemID(text) }
        #expect(error?.description == "Invalid item id: \(reason)")
        #expect(ItemID(rawValue: text) == nil)
    }
}

@Suite(.timeLimit(.minutes(3))) struct TableNameTests {
    @Test(arguments: ["TodoItem", "a", "t_1", String(repeating: "T", count: 128)])
    func acceptsValidNames(text: String) throws {
        #expect(try TableName(text).rawValue == text)
    }

    @Test(arguments: ["", "1abc", "_abc", "a-b", "a b", "a;drop", "ä", "a\"", String(repeating: "T", count: 129)])
    func refusesInvalidNames(text: String) {
        #expect(throws: ValueError.self) { try TableName(text) }
    }

    @Test func matchesCaseInsensitivelyThroughItsCanonicalForm() throws {
        #expect(try TableName("TodoItem").canonical == TableName("todoitem").canonical)
    }
}

@Suite(.timeLimit(.minutes(3))) struct VersionTests {
    @Test(arguments: [
        ("\"AAAAAAAAB9E=\"", Precondition.version(Version("AAAAAAAAB9E="))),
        ("AAAAAAAAB9E=", .version(Version("AAAAAAAAB9E="))),
        ("  \"v1\"  ", .version(Version("v1"))),
        (#""a\"b""#, .version(Version(#"a"b"#))),
        ("*", .any),
        ("\"*\"", .version(Version("*"))),
    ])
    func readsIfMatchValues(header: String, expected: Precondition) throws {
        #expect(try Precondition(ifMatch: header) == expected)
    }

    @Test(arguments: ["", "W/\"v1\"", "\"v1", "\"a\", \"b\""])
    func refusesMalformedIfMatchValues(header: String) {
        #expect(throws: ValueError.self) { try Precondition(ifMatch: header) }
    }

    @Test(arguments: ["AAAAAAAAB9E=", #"a"b"#, "", "x\\y"])
    func quotesAndUnquotesEntityTagsSymmetrically(raw: String) throws {
        let version = Version(raw)
        #expect(version.entityTag.hasPrefix("\"") && version.entityTag.hasSuffix("\""))
        #expect(try Version(entityTag: version.entityTag) == version)
    }

    @Test func quotesInnerQuotesAsTheNodeServerDoes() {
        #expect(Version(#"a"b"#).entityTag == #""a\"b""#)
    }

    @Test func preconditionAnyIsSatisfiedByEveryVersion() {
        #expect(Precondition.any.isSatisfied(by: Version("x")))
        #expect(Precondition.version(Version("x")).isSatisfied(by: Version("x")))
        #expect(!Precondition.version(Version("x")).isSatisfied(by: Version("y")))
    }
}

@Suite(.timeLimit(.minutes(3))) struct SystemPropertyTests {
    @Test func stripsServerManagedPropertiesButKeepsTheID() {
        let item: JSONValue = [
            "id": "a", "text": "t", "createdAt": "2020-01-01T00:00:00.000Z",
            "updatedAt": "2020-01-01T00:00:00.000Z", "version": "v", "deleted": false,
        ]
        #expect(item.userFields == ["id": "a", "text": "t"])
    }

    @Test func readsSystemPropertiesOfAnItem() throws {
        let item: JSONValue = ["id": "a", "version": "v1", "updatedAt": "2020-01-01T00:00:00.123Z", "deleted": true]
        #expect(item.itemID == (try ItemID("a")))
        #expect(item.version == Version("v1"))
        #expect(item.updatedAt == WireDate(parsing: "2020-01-01T00:00:00.123Z"))
        #expect(item.isDeleted)
    }

    @Test func knowsReservedAndSystemNames() {
        #expect(SystemProperty.isReserved("__createdAt"))
        #expect(!SystemProperty.isReserved("_x"))
        #expect(SystemProperty.isSystemProperty("updatedAt"))
        #expect(!SystemProperty.isSystemProperty("UpdatedAt"))
    }
}

/// Issue 14, point 9: an id is its bytes. Swift's `String ==` treats the NFC and NFD forms of `café` as equal;
/// the stores and the wire do not, so ItemID must not either (equality, hashing and order).
@Suite(.timeLimit(.minutes(3))) struct ItemIDBytesTests {
    @Test func normalizationFormsAreDifferentIDs() throws {
        let composed = try ItemID("caf\u{E9}")
        let decomposed = try ItemID("cafe\u{301}")
        #expect(composed.rawValue == decomposed.rawValue)  // what Swift's String says
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed]).count == 2)
        #expect((composed < decomposed) != (decomposed < composed))
    }
}
