import Foundation

/// Equality and hashing by value, with strings compared and hashed by their UTF-8 bytes.
///
/// `String`'s own `==` and hashing use canonical equivalence: they normalize text first, and normalizing a run of
/// combining marks that is not in canonical order costs time quadratic in the run (``ClientText``). Rows hold text
/// other users wrote, and a server that does not refuse such text (Azure's Node.js server, the Datasync toolkit) can
/// send a value of a million marks; the merge of a pull and the checks of a push compare such rows field by field.
/// By bytes, every comparison costs time linear in the text.
///
/// So two strings are equal only when their bytes are: `"é"` (U+00E9) and `"e\u{301}"` (e and a combining acute)
/// are different values, and a field that another device rewrote in another normalization counts as changed. A
/// server stores and returns the bytes it was sent, so text round-trips unchanged.
///
/// Member names stay `String` dictionary keys, compared by canonical equivalence: parsing an object hashed them
/// already, and on the server text from clients is held to ``JSONValue/ParsingLimits/clientText``.
extension JSONValue {
    /// Whether two values are the same: the same case and the same value, strings by their UTF-8 bytes, arrays
    /// element by element, objects member by member (in any order). `1` (an integer) and `1.0` (a double) differ.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let left), .bool(let right)): left == right
        case (.int(let left), .int(let right)): left == right
        case (.double(let left), .double(let right)): left == right
        case (.string(let left), .string(let right)): sameBytes(left, right)
        case (.array(let left), .array(let right)): left == right
        case (.object(let left), .object(let right)): left == right
        default: false
        }
    }

    /// Feeds the value to `hasher`, strings by their UTF-8 bytes: equal values (``==(_:_:)``) hash alike.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null:
            hasher.combine(0 as UInt8)
        case .bool(let bool):
            hasher.combine(1 as UInt8)
            hasher.combine(bool)
        case .int(let int):
            hasher.combine(2 as UInt8)
            hasher.combine(int)
        case .double(let double):
            hasher.combine(3 as UInt8)
            hasher.combine(double)
        case .string(let string):
            hasher.combine(4 as UInt8)
            hasher.combine(string.utf8.count)
            var string = string
            string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        case .array(let elements):
            hasher.combine(5 as UInt8)
            hasher.combine(elements)
        case .object(let members):
            hasher.combine(6 as UInt8)
            hasher.combine(members)
        }
    }

    /// Whether two strings have the same UTF-8 bytes, in time linear in their length.
    private static func sameBytes(_ left: String, _ right: String) -> Bool {
        guard left.utf8.count == right.utf8.count else { return false }
        var (left, right) = (left, right)
        return left.withUTF8 { leftBytes in
            right.withUTF8 { rightBytes in
                leftBytes.isEmpty || memcmp(leftBytes.baseAddress!, rightBytes.baseAddress!, leftBytes.count) == 0
            }
        }
    }
}
