/// An item's `version`: an opaque string the server changes on every write.
///
/// Clients never parse it; they send it back as a precondition (`If-Match`) so that the server can
/// refuse a write made against a stale copy. On the wire it travels quoted, as an entity tag.
///
/// For example:
/// ```swift
/// let version = Version("AAAAAAAAB9E=")
/// version.entityTag                          // "\"AAAAAAAAB9E=\""
/// try Version(entityTag: "\"AAAAAAAAB9E=\"")  // the same version
/// ```
public struct Version: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The version's text, unquoted.
    public let rawValue: String

    /// Creates a version from its unquoted text.
    ///
    /// - Parameter rawValue: The version's text.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Creates a version from its unquoted text.
    ///
    /// - Parameter rawValue: The version's text.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    /// Reads a version from an `ETag` value: quoted (`"v"`, inner quotes escaped as `\"`) or bare.
    ///
    /// - Parameter entityTag: The header's value.
    /// - Throws: ``ValueError`` for an empty tag, a weak tag (`W/"…"`), `*`, or a list of tags.
    public init(entityTag: String) throws {
        switch try Precondition(ifMatch: entityTag) {
        case .version(let version): self = version
        case .any: throw ValueError(kind: "entity tag", reason: "'*' names no version")
        }
    }

    /// The version as an entity tag: wrapped in double quotes, inner `"` and `\` escaped with `\`.
    public var entityTag: String {
        "\"" + rawValue.replacingAll("\\", with: "\\\\").replacingAll("\"", with: "\\\"") + "\""
    }

    /// The unquoted text.
    public var description: String { rawValue }

    /// Decodes a version from a string.
    ///
    /// - Parameter decoder: The decoder to read from.
    /// - Throws: A `DecodingError` when the value is not a string.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the version as a string.
    ///
    /// - Parameter encoder: The encoder to write to.
    /// - Throws: Whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// What a write requires of the stored item's version (`If-Match`, or a `version` in the body).
public enum Precondition: Sendable, Hashable {
    /// `If-Match: *`: the item must exist, whatever its version.
    case any
    /// The stored item must have exactly this version.
    case version(Version)

    /// Reads an `If-Match` header value: `*`, a quoted tag (`"v"`, `\"` unescaped) or a bare one.
    ///
    /// - Parameter ifMatch: The header's value.
    /// - Throws: ``ValueError`` for an empty value, a weak tag (`W/"…"`) or a list of tags.
    public init(ifMatch: String) throws {
        let text = ifMatch.trimmingASCIIWhitespace()
        if text == "*" {
            self = .any
            return
        }
        if text.isEmpty { throw ValueError(kind: "entity tag", reason: "it is empty") }
        if text.hasPrefix("W/") { throw ValueError(kind: "entity tag", reason: "weak tags cannot be preconditions") }
        guard text.hasPrefix("\"") else {
            self = .version(Version(text))
            return
        }
        // A quoted tag: read up to the closing quote, unescaping \" and \\.
        var result = ""
        var iterator = text.unicodeScalars.dropFirst().makeIterator()
        var closed = false
        while let scalar = iterator.next() {
            if scalar == "\\" {
                guard let escaped = iterator.next() else { break }
                result.unicodeScalars.append(escaped)
            } else if scalar == "\"" {
                closed = true
                break
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        guard closed else { throw ValueError(kind: "entity tag", reason: "the closing quote is missing") }
        guard iterator.next() == nil else {
            throw ValueError(kind: "entity tag", reason: "only one entity tag is allowed")
        }
        self = .version(Version(result))
    }

    /// Whether an item stored with `version` satisfies the precondition.
    ///
    /// - Parameter version: The stored item's version.
    /// - Returns: True when the write may go ahead.
    public func isSatisfied(by version: Version) -> Bool {
        switch self {
        case .any: true
        case .version(let required): required == version
        }
    }
}

extension String {
    package func trimmingASCIIWhitespace() -> String {
        let scalars = unicodeScalars
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }),
            let last = scalars.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(scalars[first...last])
    }

    package func replacingAll(_ target: Character, with replacement: String) -> String {
        guard contains(target) else { return self }
        var result = ""
        result.reserveCapacity(count)
        for character in self {
            if character == target { result += replacement } else { result.append(character) }
        }
        return result
    }
}
