import SyncCore
import SyncOData

/// The ids of a table with ``TableConfiguration/integerIDs``, in one place: the stores keep each id as its number
/// in 19 digits with leading zeros (every positive `Int64`), so that text order is number order and the stores'
/// statements, keys and cursors stay those of text ids; the wire shows the number. Everything that turns one form
/// into the other is here: the path's id, the insert's, `$filter`'s literals, and the rows the stores write.
enum IntegerIDs {
    /// The digits of a stored id.
    static let width = 19

    /// The stored id of the number `value` (positive).
    static func stored(_ value: Int64) throws -> ItemID { try ItemID(padded(value)) }

    /// The stored text of the number `value`: its digits after leading zeros.
    static func padded(_ value: Int64) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// The number a stored id holds, or nil for an id that is not one (a row stored before the table had integer
    /// ids).
    static func number(_ stored: String) -> Int64? {
        stored.utf8.count == width && stored.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            ? Int64(stored) : nil
    }

    /// A stored id as the wire shows it: its number (else the text as it is).
    static func shown(_ stored: String) -> JSONValue {
        number(stored).map(JSONValue.int) ?? .string(stored)
    }

    /// A stored id as a path shows it: its number's digits (else the text as it is).
    static func shownText(_ stored: String) -> String {
        number(stored).map { String($0) } ?? stored
    }

    /// The stored id a path names (`/tables/T/42`). A number that is not positive names no row (nil: 404).
    ///
    /// - Throws: ``APIError`` 400 for text that is not an integer.
    static func stored(path text: String) throws -> ItemID? {
        guard let value = Int64(text) else {
            throw APIError.badRequest("Invalid item id: this table's ids are integers, not '\(text.prefix(40))'")
        }
        return value > 0 ? try stored(value) : nil
    }

    /// The id an item of the wire names, in either form (a stored item's `id`, a number or a stored text).
    static func storedText(of id: JSONValue?) -> String? {
        switch id {
        case .int(let value)?: value > 0 ? padded(value) : nil
        case .string(let text)?: text
        default: nil
        }
    }

    /// A `$filter` with its comparisons of `id` with numbers made comparisons with stored ids: `id eq 42`,
    /// `id gt 10`, `42 le id`, also `id eq '42'` (a client that quotes ids). Any other use of `id` — a function,
    /// arithmetic, a comparison with another kind of value — is refused: text functions would see the stored digits.
    ///
    /// - Throws: ``TableStoreError/invalidQuery(_:)`` (a 400).
    static func storedFilter(_ filter: ODataExpression?) throws(TableStoreError) -> ODataExpression? {
        guard let filter else { return nil }
        return try stored(filter)
    }

    private static func stored(_ expression: ODataExpression) throws(TableStoreError) -> ODataExpression {
        switch expression {
        case .literal: return expression
        case .member(let name):
            guard name != SystemProperty.id.rawValue else { throw refusal }
            return expression
        case .not(let operand): return .not(try stored(operand))
        case .negate(let operand): return .negate(try stored(operand))
        case .binary(let op, .member(SystemProperty.id.rawValue), .literal(let literal)) where op.isComparison:
            return .binary(op, .member(SystemProperty.id.rawValue), .literal(try storedLiteral(literal)))
        case .binary(let op, .literal(let literal), .member(SystemProperty.id.rawValue)) where op.isComparison:
            return .binary(op, .literal(try storedLiteral(literal)), .member(SystemProperty.id.rawValue))
        case .binary(let op, let left, let right): return .binary(op, try stored(left), try stored(right))
        case .function(let function, let arguments):
            var stored: [ODataExpression] = []
            for argument in arguments { stored.append(try Self.stored(argument)) }
            return .function(function, stored)
        }
    }

    /// A literal compared with `id`, as a stored id: numbers at or below 0 compare as the text below every stored
    /// id ("0"…0, which no row holds), so that `id gt 0` is every row and `id eq 0` none.
    private static func storedLiteral(_ literal: ODataLiteral) throws(TableStoreError) -> ODataLiteral {
        let value: Int64
        switch literal {
        case .null: return .null
        case .int(let int): value = int
        case .string(let text):
            guard let int = Int64(text) else { throw refusal }
            value = int
        default: throw refusal
        }
        return .string(value > 0 ? padded(value) : String(repeating: "0", count: width))
    }

    private static var refusal: TableStoreError {
        .invalidQuery("this table's ids are integers, compared only with integers (id eq 42)")
    }
}
