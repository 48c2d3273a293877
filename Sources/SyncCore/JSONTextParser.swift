import Foundation

/// A recursive-descent parser over UTF-8 bytes.
struct JSONTextParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let limits: JSONValue.ParsingLimits
    var index = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>, limits: JSONValue.ParsingLimits = .none) {
        self.bytes = bytes
        self.limits = limits
    }

    mutating func parseArrayElements(keeping fields: Set<String>?) throws(JSONParseError) -> [(
        value: JSONValue, text: String
    )] {
        let elements = try parseElements(keeping: fields)
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the value") }
        return elements
    }

    /// An object whose member `name` is an array read as ``parseArrayElements(keeping:)`` reads one (each element
    /// with its text); the other members are parsed whole. The elements are nil when that member is absent or
    /// not an array.
    mutating func parseObject(withElementsOf name: String, keeping fields: Set<String>?) throws(JSONParseError)
        -> (elements: [(value: JSONValue, text: String)]?, members: [String: JSONValue])
    {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { throw fail("expected an object") }
        index += 1
        var elements: [(value: JSONValue, text: String)]?
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw fail("expected a member name")
                }
                let key = try parseMemberName()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
                if key == name, index < bytes.count, bytes[index] == UInt8(ascii: "[") {
                    elements = try parseElements(keeping: fields)
                } else {
                    members[key] = try parseValue()
                }
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of text") }
                if bytes[index] == UInt8(ascii: "}") { index += 1; break }
                guard bytes[index] == UInt8(ascii: ",") else { throw fail("expected ',' or '}'") }
                index += 1
            }
        }
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the value") }
        return (elements, members)
    }

    /// An array's elements, each with its text; the parser stops after the `]`.
    mutating func parseElements(keeping fields: Set<String>?) throws(JSONParseError) -> [(
        value: JSONValue, text: String
    )] {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { throw fail("expected an array") }
        index += 1
        var elements: [(value: JSONValue, text: String)] = []
        let kept = fields.map(KeptNames.init)
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                let start = index
                let value: JSONValue
                if let fields, index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                    value = try parseObject(keeping: fields, names: kept)
                } else {
                    value = try parseValue()
                }
                elements.append(
                    (value, String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of text") }
                if bytes[index] == UInt8(ascii: "]") { index += 1; break }
                guard bytes[index] == UInt8(ascii: ",") else { throw fail("expected ',' or ']'") }
                index += 1
            }
        }
        return elements
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the value") }
        return value
    }

    func fail(_ reason: String) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of text") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of text") }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != expected[offset] {
            throw fail("invalid literal")
        }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maximumDepth { throw fail("nesting deeper than \(JSONValue.maximumDepth)") }
    }

    /// The names an object's parse keeps, with their bytes, so that a plain member name (ASCII, no escape) is matched
    /// without building a string of it: building each name and hashing it was a third of a pulled page's parse.
    struct KeptNames {
        let names: [String]
        let bytes: [[UInt8]]

        init(_ fields: Set<String>) {
            names = Array(fields)
            bytes = names.map { Array($0.utf8) }
        }

        /// The kept name spelt by `buffer[range]`, or nil.
        func name(spelt range: Range<Int>, in buffer: UnsafeBufferPointer<UInt8>) -> String? {
            for (index, spelling) in bytes.enumerated()
            where spelling.count == range.count && spelling.elementsEqual(buffer[range]) {
                return names[index]
            }
            return nil
        }
    }

    /// The bytes of the member name at `index` (an opening quote) when it is plain — ASCII without escapes or control
    /// characters, so valid as it stands — with `index` moved past its closing quote; nil, and `index` unmoved,
    /// otherwise.
    mutating func plainName() -> Range<Int>? {
        var end = index + 1
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") {
                defer { index = end + 1 }
                return (index + 1)..<end
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        return nil
    }

    /// An object; with `fields`, its value keeps only those members (the others are checked and skipped), matched by
    /// `kept` where the name is plain.
    mutating func parseObject(keeping fields: Set<String>? = nil, names kept: KeptNames? = nil)
        throws(JSONParseError) -> JSONValue
    {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [String: JSONValue] = [:]
        members.reserveCapacity(8)
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            var key: String?
            if let kept, let spelt = plainName() {
                key = kept.name(spelt: spelt, in: bytes)
            } else {
                let name = try parseMemberName()
                key = fields.map { $0.contains(name) } == false ? nil : name
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            if let key {
                members[key] = try parseValue()
            } else {
                try skipValue()
            }
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of text") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return .object(members)
            default: throw fail("expected ',' or '}'")
            }
        }
    }

    /// Checks one value and moves past it without building it (strings are scanned, not copied).
    mutating func skipValue() throws(JSONParseError) {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of text") }
        guard bytes[index] == UInt8(ascii: "\"") else {
            _ = try parseValue()
            return
        }
        index += 1
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw fail("unterminated string") }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"): _ = try parseHex4()
                default: throw fail("invalid escape")
                }
            case 0..<0x20: throw fail("control character in a string")
            default: continue
            }
        }
        throw fail("unterminated string")
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of text") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return .array(elements)
            default: throw fail("expected ',' or ']'")
            }
        }
    }
}
