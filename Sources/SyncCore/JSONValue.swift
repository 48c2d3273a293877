/// A JSON value that keeps integers and doubles apart.
///
/// It is deliberately not `ExpressibleByNilLiteral`: `nil` always means a missing value, and JSON
/// `null` is written `.null`.
///
/// Items travel as `JSONValue` between the local store, the transport and the server, so that no
/// field is ever widened or rounded on the way: `1` stays an integer, `1.0` stays a double, and
/// every 64-bit integer survives exactly. Use ``init(parsing:)-(String)`` and ``serialized()``
/// for exact JSON text; the `Codable` conformance works with any encoder and decoder, but then the
/// distinction between `1` and `1.0` is only as good as that decoder's.
///
/// For example:
/// ```swift
/// let item: JSONValue = ["id": "a1", "text": "Buy milk", "complete": false, "count": 2]
/// let text = item.serialized()          // {"complete":false,"count":2,"id":"a1","text":"Buy milk"}
/// let back = try JSONValue(parsing: text)
/// ```
public enum JSONValue: Sendable, Hashable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without a fraction or exponent that fits in 64 bits.
    case int(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object. Key order is not significant; ``serialized()`` writes keys sorted.
    case object([String: JSONValue])
}

extension JSONValue {
    /// The members of an object, or nil for any other value.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { members } else { nil }
    }

    /// The elements of an array, or nil for any other value.
    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    /// The string, or nil for any other value.
    public var stringValue: String? {
        if case .string(let string) = self { string } else { nil }
    }

    /// The Boolean, or nil for any other value.
    public var boolValue: Bool? {
        if case .bool(let bool) = self { bool } else { nil }
    }

    /// The integer, or nil for any other value (a double is not converted).
    public var intValue: Int64? {
        if case .int(let int) = self { int } else { nil }
    }

    /// The number as a double, for an integer or a double; nil for any other value.
    public var doubleValue: Double? {
        switch self {
        case .int(let int): Double(int)
        case .double(let double): double
        default: nil
        }
    }

    /// True for `null`.
    public var isNull: Bool {
        self == .null
    }

    /// The member named `key` of an object; nil when absent or when this is not an object.
    public subscript(key: String) -> JSONValue? {
        get { objectValue?[key] }
        set {
            guard case .object(var members) = self else { return }
            members[key] = newValue
            self = .object(members)
        }
    }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// Creates a Boolean value.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// Creates an integer value.
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// Creates a double value.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// Creates a string value.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// Creates an array value.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Creates an object value; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text of the value.
    public var description: String { serialized() }
}
