import Foundation
import SyncCore

/// Decodes `Decodable` values straight from a `JSONValue`, without going through JSON text: local
/// queries decode every row they return. Dates are read from wire-date strings.
struct JSONValueDecoder: Decoder {
    let value: JSONValue
    var codingPath: [any CodingKey] = []
    /// Records the members the decoded type reads from this value, when set (see ``KeyRecorder``).
    var recorder: KeyRecorder?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The members of an object a type reads when it decodes it: the fields a typed model knows
    /// (``ItemCoder/knownFields(of:in:)``).
    final class KeyRecorder {
        /// The names asked for (read, tested for presence or for null).
        var keys: Set<String> = []
        /// Whether the type read the object as an object at all.
        var readsObject = false
        /// Whether it asked for every name the object has (`allKeys`): then it knows them all.
        var readsEveryKey = false
    }

    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONValueDecoder(value: value).decodeValue(type)
    }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if type == Date.self {
            guard let text = value.stringValue, let date = WireDate(parsing: text)?.date as? T else {
                throw DecodingError.typeMismatch(
                    Date.self, .init(codingPath: codingPath, debugDescription: "Not a wire date"))
            }
            return date
        }
        if let same = value as? T { return same }  // T is JSONValue
        // Types whose own Decodable reads what JSONDecoder hands them, not what JSONEncoder wrote:
        // decode them as JSONEncoder's default strategies encode them.
        if type == URL.self {
            guard let text = value.stringValue, let url = URL(string: text) as? T else { throw mismatch(type, "a URL") }
            return url
        }
        if type == Data.self {
            guard let text = value.stringValue, let data = Data(base64Encoded: text) as? T else {
                throw mismatch(type, "base64 data")
            }
            return data
        }
        if type == Decimal.self {
            let text: String? =
                switch value {
                case .int(let int): String(int)
                case .double(let double): "\(double)"
                case .string(let string): string
                default: nil
                }
            guard let text, let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) as? T else {
                throw mismatch(type, "a number")
            }
            return decimal
        }
        return try T(from: self)
    }

    private func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Not \(expected)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else {
            throw DecodingError.typeMismatch(
                [String: Any].self, .init(codingPath: codingPath, debugDescription: "Not an object"))
        }
        recorder?.readsObject = true
        return KeyedDecodingContainer(KeyedContainer<Key>(members: members, codingPath: codingPath, recorder: recorder))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else {
            throw DecodingError.typeMismatch(
                [Any].self, .init(codingPath: codingPath, debugDescription: "Not an array"))
        }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueContainer(value: value, codingPath: codingPath)
    }

    struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let members: [String: JSONValue]
        let codingPath: [any CodingKey]
        let recorder: KeyRecorder?
        var allKeys: [Key] {
            recorder?.readsEveryKey = true
            return members.keys.compactMap { Key(stringValue: $0) }
        }

        func contains(_ key: Key) -> Bool {
            recorder?.keys.insert(key.stringValue)
            return members[key.stringValue] != nil
        }

        private func value(_ key: Key) throws -> JSONValue {
            recorder?.keys.insert(key.stringValue)
            guard let value = members[key.stringValue] else {
                throw DecodingError.keyNotFound(
                    key, .init(codingPath: codingPath, debugDescription: "No value for '\(key.stringValue)'"))
            }
            return value
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            recorder?.keys.insert(key.stringValue)
            return (members[key.stringValue] ?? .null) == .null
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try JSONValueDecoder(value: try value(key), codingPath: codingPath + [key]).decodeValue(type)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            try JSONValueDecoder(value: try value(key), codingPath: codingPath + [key]).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try JSONValueDecoder(value: try value(key), codingPath: codingPath + [key]).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            JSONValueDecoder(value: .object(members), codingPath: codingPath, recorder: recorder)
        }
        func superDecoder(forKey key: Key) throws -> any Decoder {
            recorder?.keys.insert(key.stringValue)
            return JSONValueDecoder(value: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
        }
    }

    struct UnkeyedContainer: UnkeyedDecodingContainer {
        let elements: [JSONValue]
        let codingPath: [any CodingKey]
        var currentIndex = 0
        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        private mutating func next() throws -> JSONValue {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(
                    JSONValue.self, .init(codingPath: codingPath, debugDescription: "No more elements"))
            }
            defer { currentIndex += 1 }
            return elements[currentIndex]
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, elements[currentIndex] == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONValueDecoder(value: try next(), codingPath: codingPath).decodeValue(type)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            try JSONValueDecoder(value: try next(), codingPath: codingPath).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try JSONValueDecoder(value: try next(), codingPath: codingPath).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            JSONValueDecoder(value: try next(), codingPath: codingPath)
        }
    }

    struct SingleValueContainer: SingleValueDecodingContainer {
        let value: JSONValue
        let codingPath: [any CodingKey]

        func decodeNil() -> Bool { value == .null }

        private func mismatch<T>(_ type: T.Type) -> DecodingError {
            .typeMismatch(
                type, .init(codingPath: codingPath, debugDescription: "Found \(value.serialized().prefix(40))"))
        }

        func decode(_ type: Bool.Type) throws -> Bool {
            guard let bool = value.boolValue else { throw mismatch(type) }
            return bool
        }

        func decode(_ type: String.Type) throws -> String {
            guard let string = value.stringValue else { throw mismatch(type) }
            return string
        }

        func decode(_ type: Double.Type) throws -> Double {
            guard let double = value.doubleValue else { throw mismatch(type) }
            return double
        }

        func decode(_ type: Float.Type) throws -> Float {
            guard let double = value.doubleValue else { throw mismatch(type) }
            return Float(double)
        }

        func decode<T: Decodable & FixedWidthInteger>(integer type: T.Type) throws -> T {
            switch value {
            case .int(let int): if let exact = T(exactly: int) { return exact }
            case .double(let double): if let exact = T(exactly: double) { return exact }
            default: break
            }
            throw mismatch(type)
        }

        func decode(_ type: Int.Type) throws -> Int { try decode(integer: type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decode(integer: type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decode(integer: type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decode(integer: type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decode(integer: type) }
        func decode(_ type: UInt.Type) throws -> UInt { try decode(integer: type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decode(integer: type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decode(integer: type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decode(integer: type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decode(integer: type) }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONValueDecoder(value: value, codingPath: codingPath).decodeValue(type)
        }
    }
}
