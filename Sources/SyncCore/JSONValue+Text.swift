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
}
