import Foundation
public import SyncCore

/// What a column holds, as the translator needs to know it.
public enum SQLColumnType: String, Sendable, Hashable, CaseIterable, Codable {
    /// Text (SQLite `TEXT`, PostgreSQL `text`).
    case string
    /// A 64-bit integer (`INTEGER`, `bigint`).
    case integer
    /// A double (`REAL`, `double precision`).
    case double
    /// A Boolean (SQLite `INTEGER` 0/1, PostgreSQL `boolean`).
    case bool
    /// A date, stored as milliseconds since 1970 (`INTEGER`, `bigint`).
    case date
    /// A nested object or array, stored as JSON text; it can only be compared with `null`.
    case json
    /// Any JSON value, as SQLite's `json_extract` returns it (dates are wire strings, Booleans 0 or 1):
    /// comparisons and functions accept it with any other type (SQLite only).
    case dynamic
}

/// A column that a `$filter` field name resolves to.
public struct SQLColumn: Sendable, Hashable {
    /// The column's name in the database (quoted by the translator, never spliced raw).
    public var name: String
    /// What it holds.
    public var type: SQLColumnType
    /// Whether it can hold `NULL`. Comparisons on columns that cannot are plain SQL operators, which
    /// indexes serve best.
    public var isNullable: Bool

    /// Trusted SQL that computes the value instead of the quoted column name, such as
    /// `json_extract("data", '$.text')`; nil for a plain column. Never built from user text.
    public var expression: String?
    /// How a string column compares and sorts; with a collation other than binary, ``collationKeyColumn`` holds
    /// each value's ``Collation/key(_:)``, which `$orderby` and the comparison operators use instead.
    public var collation = Collation.binary
    /// The column holding the collation keys of a column whose ``collation`` is not binary.
    public var collationKeyColumn: String?

    /// Describes a column.
    ///
    /// - Parameters:
    ///   - name: The column's name in the database.
    ///   - type: What it holds.
    ///   - isNullable: Whether it can hold `NULL`; true by default.
    ///   - expression: Trusted SQL computing the value, or nil for the quoted column name.
    public init(name: String, type: SQLColumnType, isNullable: Bool = true, expression: String? = nil) {
        self.name = name
        self.type = type
        self.isNullable = isNullable
        self.expression = expression
    }
}
