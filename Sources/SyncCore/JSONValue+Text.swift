public import Foundation

/// Why a JSON text could not be parsed.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, in a few words.
    public let reason: String
    /// The byte offset (0-based) in the UTF-8 text where the problem was found.
    public let offset: Int

    /// One readable line, without the text itself.
    public var description: String { "Invalid JSON: \(reason) at byte \(offset)" }
}

extension JSONValue {
    /// The deepest nesting of arrays and objects the parser accepts.
    public static let maximumDepth = 512

    /// Parses JSON text exactly: integers stay integers, doubles stay doubles.
    ///
    /// - Parameter text: One JSON value, optionally surrounded by white space.
    /// - Throws: ``JSONParseError`` for anything that is not exactly one valid JSON value.
    public init(parsing text: String) throws {
        var text = text
        self = try text.withUTF8 { try JSONValue(parsingUTF8: $0) }
    }

    /// Parses UTF-8 encoded JSON exactly: integers stay integers, doubles stay doubles.
    ///
    /// - Parameter data: One JSON value in UTF-8, optionally surrounded by white space.
    /// - Throws: ``JSONParseError`` for anything that is not exactly one valid JSON value.
    public init(parsing data: Data) throws {
        self = try data.withUnsafeBytes { raw in
            try JSONValue(parsingUTF8: raw.bindMemory(to: UInt8.self))
        }
    }

    /// Parses UTF-8 encoded JSON from a buffer.
    ///
    /// - Parameters:
    ///   - bytes: One JSON value in UTF-8, optionally surrounded by white space.
    ///   - limits: What the text may hold beyond valid JSON; ``ParsingLimits/none`` by default. Text from a client
    ///     is parsed with ``ParsingLimits/clientText``.
    /// - Throws: ``JSONParseError`` for anything that is not exactly one valid JSON value, or that the limits refuse.
    public init(parsingUTF8 bytes: UnsafeBufferPointer<UInt8>, limits: ParsingLimits = .none) throws {
        var parser = JSONTextParser(bytes: bytes, limits: limits)
        self = try parser.parseDocument()
    }

    /// What a JSON text may hold beyond being valid JSON, checked on its bytes and scalars while it is parsed, before
    /// any member name becomes a dictionary key: hashing a `String` normalizes it, which costs time quadratic in a
    /// run of combining marks (see ``ClientText``).
    public struct ParsingLimits: Sendable, Hashable {
        /// The most UTF-8 bytes in a member name; nil for no limit.
        public var maximumMemberNameBytes: Int?
        /// Whether member names must be ASCII.
        public var asciiMemberNames: Bool
        /// Whether strings must be stream-safe (``ClientText/isStreamSafe(_:)``).
        public var streamSafeStrings: Bool

        /// Creates limits.
        ///
        /// - Parameters:
        ///   - maximumMemberNameBytes: The most UTF-8 bytes in a member name; nil for no limit.
        ///   - asciiMemberNames: Whether member names must be ASCII.
        ///   - streamSafeStrings: Whether strings must be stream-safe.
        public init(maximumMemberNameBytes: Int?, asciiMemberNames: Bool, streamSafeStrings: Bool) {
            self.maximumMemberNameBytes = maximumMemberNameBytes
            self.asciiMemberNames = asciiMemberNames
            self.streamSafeStrings = streamSafeStrings
        }

        /// Any valid JSON.
        public static let none = ParsingLimits(
            maximumMemberNameBytes: nil, asciiMemberNames: false, streamSafeStrings: false)

        /// JSON from a client, whose parse must cost time linear in its length: member names of at most 255 ASCII
        /// bytes (a field is 1–63; a nested object's names on a dynamic table may be longer) and stream-safe strings.
        public static let clientText = ParsingLimits(
            maximumMemberNameBytes: 255, asciiMemberNames: true, streamSafeStrings: true)
    }

    /// Parses a JSON array, returning each element with its exact text (for storing rows as received).
    ///
    /// With `fields`, an element that is an object keeps only those top-level members in its value (the
    /// others are checked and skipped, not built): the text still holds the whole element.
    /// - Parameters:
    ///   - data: A JSON array in UTF-8.
    ///   - fields: The members to keep in each object's value; nil keeps everything.
    /// - Returns: The elements, each with the text it was parsed from.
    /// - Throws: ``JSONParseError`` when the text is not one JSON array.
    package static func parseArrayElements(_ data: Data, keeping fields: Set<String>? = nil) throws
        -> [(value: JSONValue, text: String)]
    {
        try data.withUnsafeBytes { raw in
            var parser = JSONTextParser(bytes: raw.bindMemory(to: UInt8.self))
            return try parser.parseArrayElements(keeping: fields)
        }
    }

    /// Parses a JSON object one of whose members is an array of rows (a page: `{"items": […], "count": 3}`),
    /// returning that array's elements as ``parseArrayElements(_:keeping:)`` does and the other members whole.
    ///
    /// - Parameters:
    ///   - data: A JSON object in UTF-8.
    ///   - name: The member that holds the array.
    ///   - fields: The members to keep in each element's value; nil keeps everything.
    /// - Returns: The elements (nil when the object has no such member, or it is not an array) and the other
    ///   members.
    /// - Throws: ``JSONParseError`` when the text is not one JSON object.
    package static func parseObject(
        _ data: Data, withElementsOf name: String, keeping fields: Set<String>? = nil
    ) throws -> (elements: [(value: JSONValue, text: String)]?, members: [String: JSONValue]) {
        try data.withUnsafeBytes { raw in
            var parser = JSONTextParser(bytes: raw.bindMemory(to: UInt8.self))
            return try parser.parseObject(withElementsOf: name, keeping: fields)
        }
    }

    /// The compact JSON text of this value, object keys sorted, doubles written with full precision.
    ///
    /// A double that is not finite (which no parsed JSON can hold) is written as `null`.
    /// - Returns: The JSON text.
    public func serialized() -> String {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        write(to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// The compact JSON text of this value as UTF-8 data (see ``serialized()``).
    ///
    /// - Returns: The UTF-8 encoded JSON text.
    public func serializedData() -> Data {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        write(to: &output)
        return Data(output)
    }

    /// Appends the compact JSON text of this value to `output`.
    ///
    /// - Parameter output: The buffer to append UTF-8 bytes to.
    public func write(to output: inout [UInt8]) {
        switch self {
        case .null:
            output.append(contentsOf: "null".utf8)
        case .bool(let bool):
            output.append(contentsOf: (bool ? "true" : "false").utf8)
        case .int(let int):
            output.append(contentsOf: String(int).utf8)
        case .double(let double):
            output.append(contentsOf: (double.isFinite ? double.description : "null").utf8)
        case .string(let string):
            Self.writeString(string, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                element.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(member.key, to: &output)
                output.append(UInt8(ascii: ":"))
                member.value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ string: String, to output: inout [UInt8]) {
        let written = string.utf8.withContiguousStorageIfAvailable { bytes in
            writeString(bytes: bytes, to: &output)
        }
        if written == nil {  // a string bridged from Objective-C: its bytes copied first
            Array(string.utf8).withUnsafeBufferPointer { bytes in writeString(bytes: bytes, to: &output) }
        }
    }

    /// Appends `bytes` (UTF-8) as a JSON string, quoted and escaped.
    private static func writeString(bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most strings need no escaping: copy them whole.
        if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            output.append(contentsOf: bytes)
            output.append(UInt8(ascii: "\""))
            return
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: "\\u00".utf8)
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0xF)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

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
    private mutating func parseElements(keeping fields: Set<String>?) throws(JSONParseError) -> [(
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

    private func fail(_ reason: String) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
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

    private mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of text") }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != expected[offset] {
            throw fail("invalid literal")
        }
        index += count
    }

    private mutating func enter() throws(JSONParseError) {
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
    private mutating func plainName() -> Range<Int>? {
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
    private mutating func parseObject(keeping fields: Set<String>? = nil, names kept: KeptNames? = nil)
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
    private mutating func skipValue() throws(JSONParseError) {
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

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
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

    /// A member name, checked against the limits before it is hashed.
    private mutating func parseMemberName() throws(JSONParseError) -> String {
        let start = index
        let name = try parseStringText()
        if let maximum = limits.maximumMemberNameBytes, name.utf8.count > maximum {
            throw JSONParseError(reason: "a member name longer than \(maximum) bytes", offset: start)
        }
        if limits.asciiMemberNames, !name.utf8.allSatisfy({ $0 < 0x80 }) {
            throw JSONParseError(reason: "a member name that is not ASCII", offset: start)
        }
        try checkStreamSafety(name, "a member name", at: start)
        return name
    }

    /// A string, refused when the limits ask for stream-safe text and it is not.
    private mutating func parseString() throws(JSONParseError) -> String {
        let start = index
        let string = try parseStringText()
        try checkStreamSafety(string, "a string", at: start)
        return string
    }

    /// Refuses `text` (`what`, at byte `start`) when the limits ask for stream-safe text and it is not.
    private func checkStreamSafety(_ text: String, _ what: String, at start: Int) throws(JSONParseError) {
        guard limits.streamSafeStrings, !ClientText.isStreamSafe(text) else { return }
        throw JSONParseError(
            reason: "\(what) with more than \(ClientText.maximumNonStarterRun) combining marks in a row", offset: start)
    }

    private mutating func parseStringText() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let string = String(validating: slice, as: UTF8.self) else {
                    throw JSONParseError(reason: "invalid UTF-8 in a string", offset: start)
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail("control character in a string") }
            index += 1
        }
        var buffer = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: buffer, as: UTF8.self) else {
                    throw JSONParseError(reason: "invalid UTF-8 in a string", offset: start)
                }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &buffer)
            case 0..<0x20:
                throw fail("control character in a string")
            default:
                buffer.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    private mutating func parseEscape(into buffer: inout [UInt8]) throws(JSONParseError) {
        guard index < bytes.count else { throw fail("unterminated string") }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(byte)
        case UInt8(ascii: "b"): buffer.append(0x08)
        case UInt8(ascii: "f"): buffer.append(0x0C)
        case UInt8(ascii: "n"): buffer.append(0x0A)
        case UInt8(ascii: "r"): buffer.append(0x0D)
        case UInt8(ascii: "t"): buffer.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw fail("unpaired surrogate") }
                index += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw fail("unpaired surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
            buffer.append(contentsOf: String(Character(unicode)).utf8)
        default:
            throw fail("invalid escape")
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let int = Int64(text) { return .int(int) }
        guard let double = Double(text), double.isFinite else {
            throw JSONParseError(reason: "number out of range", offset: start)
        }
        return .double(double)
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
