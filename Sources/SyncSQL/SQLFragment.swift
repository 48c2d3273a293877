import Foundation
import SyncCore

/// The SQL databases the translator writes for.
/// What integer arithmetic in a filter answers when its result leaves the 64-bit range, on every store.
public let integerOverflowMessage = "integer arithmetic in the filter overflows the 64-bit range"

/// The SQLite function that checks integer arithmetic (SQLite turns an overflowing result into a double
/// where PostgreSQL fails): `openDatabasePool` registers it.
public let checkedIntegerFunction = "sync_checked_integer"

public enum SQLDialect: String, Sendable, Hashable, CaseIterable {
    /// SQLite 3.31 or later. Connections must provide the functions `swiftLowercaseString` and
    /// `swiftUppercaseString` (Unicode-aware case mapping; GRDB registers both on every connection).
    case sqlite
    /// PostgreSQL 12 or later, with a UTF-8 database. `toupper` and `tolower` use the database's
    /// case mapping, plus ß → SS; other one-to-many mappings of Unicode's special casing (ligatures
    /// such as ﬁ → FI) are left as the database has them.
    case postgres

    /// The function that maps a string to lowercase, Unicode-aware.
    var lowercaseFunction: String { self == .sqlite ? "swiftLowercaseString" : "lower" }
    /// The function that maps a string to uppercase, Unicode-aware.
    var uppercaseFunction: String { self == .sqlite ? "swiftUppercaseString" : "upper" }

    /// `name` as a quoted identifier, or nil when it is not letters, digits and `_` starting with
    /// a letter or `_` (1–128 ASCII characters): nothing else is ever spliced into SQL.
    ///
    /// - Parameter name: A table or column name.
    /// - Returns: The name in double quotes, or nil.
    public func quotedIdentifier(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 128, first.isASCIILetter || first == UInt8(ascii: "_"),
            bytes.allSatisfy({ $0.isASCIILetter || $0.isASCIIDigit || $0 == UInt8(ascii: "_") })
        else { return nil }
        return "\"" + name + "\""
    }
}

/// A value bound to a statement parameter.
public enum SQLValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A Boolean (SQLite stores it as 0 or 1).
    case bool(Bool)
    /// A 64-bit integer (dates are bound as milliseconds since 1970).
    case int(Int64)
    /// A double.
    case double(Double)
    /// A string.
    case text(String)
}

/// A piece of SQL whose values are kept apart as parameters until it is rendered for a dialect.
///
/// For example:
/// ```swift
/// let fragment = SQLFragment("\"age\" > ") + SQLFragment(parameter: .int(30))
/// fragment.render(for: .postgres)   // ("\"age\" > $1", [.int(30)])
/// ```
public struct SQLFragment: Sendable, Hashable {
    enum Segment: Sendable, Hashable {
        case text(String)
        case parameter(SQLValue)
    }

    private(set) var segments: [Segment]

    /// SQL text written by the caller, never by a user: keywords, quoted identifiers, operators.
    ///
    /// - Parameter sql: Trusted SQL text.
    public init(_ sql: String) {
        segments = sql.isEmpty ? [] : [.text(sql)]
    }

    /// A single bound parameter.
    ///
    /// - Parameter value: The value to bind.
    public init(parameter value: SQLValue) {
        segments = [.parameter(value)]
    }

    /// Joins two fragments.
    public static func + (lhs: SQLFragment, rhs: SQLFragment) -> SQLFragment {
        var result = lhs
        result.segments.append(contentsOf: rhs.segments)
        return result
    }

    /// Appends a fragment.
    public static func += (lhs: inout SQLFragment, rhs: SQLFragment) {
        lhs.segments.append(contentsOf: rhs.segments)
    }

    /// The fragments joined with `separator` between them.
    ///
    /// - Parameters:
    ///   - fragments: The fragments.
    ///   - separator: Trusted SQL text to put between them.
    /// - Returns: The joined fragment.
    public static func joined(_ fragments: [SQLFragment], separator: String) -> SQLFragment {
        var result = SQLFragment("")
        for (index, fragment) in fragments.enumerated() {
            if index > 0 { result += SQLFragment(separator) }
            result += fragment
        }
        return result
    }

    /// The bound values, in order.
    public var arguments: [SQLValue] {
        segments.compactMap { if case .parameter(let value) = $0 { value } else { nil } }
    }

    /// The SQL text with placeholders for `dialect` (`?` for SQLite; `$n` for PostgreSQL, numbered
    /// from `firstParameterIndex`), and the values to bind in order.
    ///
    /// - Parameters:
    ///   - dialect: The database to write for.
    ///   - firstParameterIndex: The number of the first PostgreSQL placeholder.
    /// - Returns: The SQL text and its arguments.
    public func render(for dialect: SQLDialect, firstParameterIndex: Int = 1) -> (sql: String, arguments: [SQLValue]) {
        var sql = ""
        var arguments: [SQLValue] = []
        for segment in segments {
            switch segment {
            case .text(let text):
                sql += text
            case .parameter(let value):
                arguments.append(value)
                switch dialect {
                case .sqlite: sql += "?"
                case .postgres: sql += "$\(firstParameterIndex + arguments.count - 1)"
                }
            }
        }
        return (sql, arguments)
    }
}
