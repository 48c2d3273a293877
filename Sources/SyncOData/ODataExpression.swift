import Foundation
public import SyncCore

/// A parsed `$filter` expression (PROTOCOL.md §4).
///
/// Build one with the SDK's `QueryExpression` or ``init(parsing:)``, turn it back into OData text with
/// ``odataText``, or into parameterized SQL with `SQLTranslator` (SyncSQL). `parse(render(x)) == x` holds for
/// every expression whose member names are valid identifiers.
public indirect enum ODataExpression: Sendable, Hashable {
    /// A constant.
    case literal(ODataLiteral)
    /// A field, possibly a path such as `address/city`.
    case member(String)
    /// Logical negation: `not x`.
    case not(ODataExpression)
    /// Arithmetic negation: `-x`.
    case negate(ODataExpression)
    /// An infix operation such as `a eq b` or `a add b`.
    case binary(ODataBinaryOperator, ODataExpression, ODataExpression)
    /// A function call such as `startswith(name,'b')`.
    case function(ODataFunction, [ODataExpression])
}

/// A constant in a `$filter` expression.
public enum ODataLiteral: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer, such as `42` or `42L`.
    case int(Int64)
    /// A number with a fraction or exponent, such as `1.5`, `1e3` or `5.99d`. Must be finite.
    case double(Double)
    /// A string, such as `'it''s'`.
    case string(String)
    /// A date, such as `datetime'2012-05-21T00:00:29.300Z'`; the style is how it is written.
    case date(WireDate, ODataDateStyle)
    /// A GUID, such as `guid'01234567-89AB-CDEF-0123-456789ABCDEF'`, compared as a string.
    case guid(String)
}

/// How a date literal is written.
public enum ODataDateStyle: String, Sendable, Hashable, CaseIterable {
    /// `datetime'…'` (OData v3).
    case datetime
    /// `datetimeoffset'…'` (OData v3).
    case datetimeoffset
    /// `cast('…',Edm.DateTimeOffset)` (OData v4).
    case cast
}

/// The infix operators of `$filter`.
public enum ODataBinaryOperator: String, Sendable, Hashable, CaseIterable {
    case and, or
    case eq, ne, gt, ge, lt, le
    case add, sub, mul, div, mod

    /// Binding strength: `or` binds loosest, `mul`/`div`/`mod` tightest.
    var precedence: Int {
        switch self {
        case .or: 1
        case .and: 2
        case .eq, .ne, .gt, .ge, .lt, .le: 3
        case .add, .sub: 4
        case .mul, .div, .mod: 5
        }
    }

    /// True for `eq ne gt ge lt le`.
    public var isComparison: Bool { precedence == 3 }

    /// True for `and` and `or`.
    public var isLogical: Bool { self == .and || self == .or }

    /// True for `add sub mul div mod`.
    public var isArithmetic: Bool { precedence >= 4 }
}

/// The functions `$filter` supports, with their arities.
public enum ODataFunction: String, Sendable, Hashable, CaseIterable {
    /// `substringof(needle, field)`: v2's "contains", arguments reversed.
    case substringof
    /// `contains(field, needle)` (OData v4).
    case contains
    case startswith, endswith, length, indexof, substring, tolower, toupper, trim, concat
    /// `replace(field, find, with)`: every occurrence of `find` (case-sensitive) replaced (OData v2, as the Node.js
    /// server's `stringReplace` feature).
    case replace
    case year, month, day, hour, minute, second
    case round, floor, ceiling

    /// How many arguments the function takes.
    public var arity: ClosedRange<Int> {
        switch self {
        case .substringof, .contains, .startswith, .endswith, .indexof, .concat: 2...2
        case .substring: 2...3
        case .replace: 3...3
        default: 1...1
        }
    }
}
