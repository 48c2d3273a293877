/// The name of a table, as in `/tables/{name}`.
///
/// Valid names have 1–128 ASCII letters, digits and `_`, and start with a letter (PROTOCOL.md §1),
/// so a table name is always safe to use as a quoted SQL identifier. Servers match names
/// case-insensitively: compare ``canonical`` for that.
///
/// For example:
/// ```swift
/// let table = try TableName("TodoItem")
/// ```
public struct TableName: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The name as written by the caller.
    public let rawValue: String

    /// Creates a name, or nil when `rawValue` breaks the rules.
    ///
    /// - Parameter rawValue: The table's name.
    public init?(rawValue: String) {
        guard Self.validate(rawValue) == nil else { return nil }
        self.rawValue = rawValue
    }

    /// Creates a name, validating it.
    ///
    /// - Parameter rawValue: The table's name.
    /// - Throws: ``ValueError`` naming the rule the name breaks.
    public init(_ rawValue: String) throws {
        if let reason = Self.validate(rawValue) { throw ValueError(kind: "table name", reason: reason) }
        self.rawValue = rawValue
    }

    /// The lowercased name, under which servers look tables up.
    public var canonical: String { rawValue.lowercased() }

    /// The name.
    public var description: String { rawValue }

    /// Why `text` is not a valid table name, or nil when it is.
    ///
    /// - Parameter text: A candidate name.
    /// - Returns: The broken rule in a few words, or nil.
    public static func validate(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard let first = bytes.first else { return "it is empty" }
        if bytes.count > 128 { return "it is longer than 128 characters" }
        guard first.isASCIILetter else { return "it must start with a letter" }
        guard bytes.allSatisfy({ $0.isASCIILetter || $0.isASCIIDigit || $0 == UInt8(ascii: "_") }) else {
            return "only letters, digits and '_' are allowed"
        }
        return nil
    }

    /// Decodes a name from a string, validating it.
    ///
    /// - Parameter decoder: The decoder to read from.
    /// - Throws: `DecodingError.dataCorrupted` for an invalid name.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        if let reason = Self.validate(text) {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Invalid table name: \(reason)")
        }
        rawValue = text
    }

    /// Encodes the name as a string.
    ///
    /// - Parameter encoder: The encoder to write to.
    /// - Throws: Whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension UInt8 {
    package var isASCIILetter: Bool { (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
    package var isASCIIDigit: Bool { (0x30...0x39).contains(self) }
}
