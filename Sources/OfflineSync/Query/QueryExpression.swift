public import Foundation
public import SyncCore
package import SyncOData

/// A condition or value in a query's filter, built with Swift operators and methods, rendered as OData
/// `$filter` text for the server and as SQL for the local store.
///
/// For example:
/// ```swift
/// let open = QueryExpression.field("complete") == false
/// let recent = QueryExpression.field("createdAt") > Date().addingTimeInterval(-86_400)
/// let named = QueryExpression.field("name").lowercased() == QueryExpression.value("bob").lowercased()
/// let query = TableQuery<Person>().filter(open && (recent || named))
/// ```
public struct QueryExpression: Sendable {
    /// The expression built so far.
    package var expression: ODataExpression

    /// Wraps an expression.
    ///
    /// - Parameter expression: The expression.
    package init(_ expression: ODataExpression) {
        self.expression = expression
    }

    /// A field (column) of the table, possibly a path such as `address/city`.
    ///
    /// - Parameter name: The field's name.
    /// - Returns: An expression naming the field.
    public static func field(_ name: String) -> QueryExpression {
        QueryExpression(.member(name))
    }

    /// A constant.
    ///
    /// - Parameter value: The constant.
    /// - Returns: An expression for it.
    public static func value(_ value: some QueryExpressionConvertible) -> QueryExpression {
        value.queryExpression
    }

    /// A condition every row meets: `(1 eq 1)`.
    public static let always = QueryExpression(.binary(.eq, .literal(.int(1)), .literal(.int(1))))
    /// A condition no row meets: `(1 eq 0)`.
    public static let never = QueryExpression(.binary(.eq, .literal(.int(1)), .literal(.int(0))))

    private func call(_ function: ODataFunction, _ arguments: any QueryExpressionConvertible...) -> QueryExpression {
        QueryExpression(.function(function, [expression] + arguments.map(\.queryExpression.expression)))
    }

    /// `startswith(self,prefix)`: whether the string begins with `prefix` (case-sensitive).
    public func startsWith(_ prefix: some QueryExpressionConvertible) -> QueryExpression {
        call(.startswith, prefix)
    }

    /// `endswith(self,suffix)`: whether the string ends with `suffix` (case-sensitive).
    public func endsWith(_ suffix: some QueryExpressionConvertible) -> QueryExpression {
        call(.endswith, suffix)
    }

    /// `substringof(needle,self)`: whether the string contains `needle` (case-sensitive).
    ///
    /// Written in v2's form, which every v2 server understands.
    public func contains(_ needle: some QueryExpressionConvertible) -> QueryExpression {
        QueryExpression(.function(.substringof, [needle.queryExpression.expression, expression]))
    }

    /// `length(self)`: the string's length in Unicode characters.
    public var length: QueryExpression { call(.length) }

    /// `indexof(self,needle)`: the 0-based position of `needle`, or -1.
    public func indexOf(_ needle: some QueryExpressionConvertible) -> QueryExpression {
        call(.indexof, needle)
    }

    /// `substring(self,start)`: the characters from 0-based `start` on.
    public func substring(from start: some QueryExpressionConvertible) -> QueryExpression {
        call(.substring, start)
    }

    /// `substring(self,start,length)`: `length` characters from 0-based `start`.
    public func substring(
        from start: some QueryExpressionConvertible, length: some QueryExpressionConvertible
    ) -> QueryExpression {
        call(.substring, start, length)
    }

    /// `tolower(self)`.
    public func lowercased() -> QueryExpression { call(.tolower) }
    /// `toupper(self)`.
    public func uppercased() -> QueryExpression { call(.toupper) }
    /// `trim(self)`.
    public func trimmed() -> QueryExpression { call(.trim) }
    /// `concat(self,other)`.
    public func concatenated(with other: some QueryExpressionConvertible) -> QueryExpression {
        call(.concat, other)
    }

    /// `year(self)` of a date, in UTC.
    public var year: QueryExpression { call(.year) }
    /// `month(self)` of a date (1–12), in UTC.
    public var month: QueryExpression { call(.month) }
    /// `day(self)` of a date (1–31), in UTC.
    public var day: QueryExpression { call(.day) }
    /// `hour(self)` of a date (0–23), in UTC.
    public var hour: QueryExpression { call(.hour) }
    /// `minute(self)` of a date (0–59).
    public var minute: QueryExpression { call(.minute) }
    /// `second(self)` of a date (0–59).
    public var second: QueryExpression { call(.second) }

    /// `round(self)`: half away from zero.
    public func rounded() -> QueryExpression { call(.round) }
    /// `floor(self)`.
    public func floor() -> QueryExpression { call(.floor) }
    /// `ceiling(self)`.
    public func ceiling() -> QueryExpression { call(.ceiling) }

    /// `(self eq null)`.
    public var isNull: QueryExpression { QueryExpression(.binary(.eq, expression, .literal(.null))) }
    /// `(self ne null)`.
    public var isNotNull: QueryExpression { QueryExpression(.binary(.ne, expression, .literal(.null))) }

    /// `((self eq a) or (self eq b) …)`; `(1 eq 0)` when `values` is empty.
    ///
    /// - Parameter values: The values to match.
    /// - Returns: A condition true when the field equals any of them.
    public func isIn<Value: QueryExpressionConvertible>(_ values: [Value]) -> QueryExpression {
        let terms = values.map { ODataExpression.binary(.eq, expression, $0.queryExpression.expression) }
        guard let first = terms.first else { return .never }
        return QueryExpression(terms.dropFirst().reduce(first) { .binary(.or, $0, $1) })
    }

    /// `((self ge low) and (self le high))`.
    ///
    /// - Parameters:
    ///   - low: The smallest matching value.
    ///   - high: The largest matching value.
    /// - Returns: A condition true when the field lies in the closed range.
    public func isBetween(_ low: some QueryExpressionConvertible, and high: some QueryExpressionConvertible)
        -> QueryExpression
    {
        self >= low && self <= high
    }
}

/// A Swift value that can stand in a ``QueryExpression``: strings, integers, doubles, Booleans,
/// dates, UUIDs, and expressions themselves.
public protocol QueryExpressionConvertible: Sendable {
    /// The value as an expression.
    var queryExpression: QueryExpression { get }
}

extension QueryExpression: QueryExpressionConvertible {
    /// The expression itself.
    public var queryExpression: QueryExpression { self }
}

extension String: QueryExpressionConvertible {
    /// The string as a literal: `'…'`.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.string(self))) }
}

extension Int: QueryExpressionConvertible {
    /// The integer as a literal.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.int(Int64(self)))) }
}

extension Int64: QueryExpressionConvertible {
    /// The integer as a literal.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.int(self))) }
}

extension Double: QueryExpressionConvertible {
    /// The double as a literal, with full precision.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.double(self))) }
}

extension Bool: QueryExpressionConvertible {
    /// `true` or `false`.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.bool(self))) }
}

extension Date: QueryExpressionConvertible {
    /// The date as `datetime'…Z'`, truncated to the millisecond.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.date(WireDate(self), .datetime))) }
}

extension WireDate: QueryExpressionConvertible {
    /// The date as `datetime'…Z'`.
    public var queryExpression: QueryExpression { QueryExpression(.literal(.date(self, .datetime))) }
}

extension UUID: QueryExpressionConvertible {
    /// The UUID as a string literal in lowercase, as ids are written.
    public var queryExpression: QueryExpression {
        QueryExpression(.literal(.string(uuidString.lowercased())))
    }
}

// MARK: Operators

private func binary(
    _ op: ODataBinaryOperator, _ left: some QueryExpressionConvertible, _ right: some QueryExpressionConvertible
) -> QueryExpression {
    QueryExpression(.binary(op, left.queryExpression.expression, right.queryExpression.expression))
}

extension QueryExpression {
    /// `(lhs eq rhs)`.
    public static func == (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.eq, lhs, rhs)
    }
    /// `(lhs ne rhs)`.
    public static func != (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.ne, lhs, rhs)
    }
    /// `(lhs gt rhs)`.
    public static func > (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.gt, lhs, rhs)
    }
    /// `(lhs ge rhs)`.
    public static func >= (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.ge, lhs, rhs)
    }
    /// `(lhs lt rhs)`.
    public static func < (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.lt, lhs, rhs)
    }
    /// `(lhs le rhs)`.
    public static func <= (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.le, lhs, rhs)
    }
    /// `(lhs and rhs)`.
    public static func && (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression {
        binary(.and, lhs, rhs)
    }
    /// `(lhs or rhs)`.
    public static func || (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression {
        binary(.or, lhs, rhs)
    }
    /// `not(operand)`.
    public static prefix func ! (operand: QueryExpression) -> QueryExpression {
        QueryExpression(.not(operand.expression))
    }
    /// `(lhs add rhs)`.
    public static func + (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.add, lhs, rhs)
    }
    /// `(lhs sub rhs)`.
    public static func - (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.sub, lhs, rhs)
    }
    /// `(lhs mul rhs)`.
    public static func * (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.mul, lhs, rhs)
    }
    /// `(lhs div rhs)`: integer division truncates toward zero.
    public static func / (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.div, lhs, rhs)
    }
    /// `(lhs mod rhs)`: the remainder takes the dividend's sign.
    public static func % (lhs: QueryExpression, rhs: some QueryExpressionConvertible) -> QueryExpression {
        binary(.mod, lhs, rhs)
    }
    /// `-(operand)`.
    public static prefix func - (operand: QueryExpression) -> QueryExpression {
        QueryExpression(.negate(operand.expression))
    }
}
