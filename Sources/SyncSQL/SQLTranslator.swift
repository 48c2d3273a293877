import Foundation
public import SyncCore
public import SyncOData

/// Translates `$filter` and `$orderby` into parameterized SQL for SQLite or PostgreSQL.
///
/// Field names go through `resolveColumn` (an unknown field is an error), identifiers are validated
/// and quoted, and every literal becomes a bound parameter. The SQL has the semantics of
/// PROTOCOL.md §4 on both databases: two-valued logic (a comparison with null is false, except
/// `eq null`/`ne null`), ordinal case-sensitive strings, 0-based `indexof`/`substring`, integer
/// `div` truncating toward zero, division by zero giving null, dates compared as instants.
///
/// For example:
/// ```swift
/// let translator = SQLTranslator(dialect: .sqlite) { field in
///     field == "name" ? SQLColumn(name: "name", type: .string) : nil
/// }
/// let filter = try ODataExpression(parsing: "startswith(name,'b')")
/// let (sql, arguments) = try translator.predicate(filter).render(for: .sqlite)
/// // sql: COALESCE(("name" GLOB ?), FALSE)   arguments: [.text("b*")]
/// ```
public struct SQLTranslator: Sendable {
    /// The database to write for.
    public var dialect: SQLDialect
    /// Maps a field name (or path) to its column; nil for an unknown field.
    public var resolveColumn: @Sendable (String) -> SQLColumn?

    /// Creates a translator.
    ///
    /// - Parameters:
    ///   - dialect: The database to write for.
    ///   - resolveColumn: Maps a field name to its column; nil for an unknown field.
    public init(dialect: SQLDialect, resolveColumn: @escaping @Sendable (String) -> SQLColumn?) {
        self.dialect = dialect
        self.resolveColumn = resolveColumn
    }

    /// A condition for a `WHERE` clause that is true exactly for the rows `filter` matches.
    ///
    /// - Parameter filter: A Boolean `$filter` expression.
    /// - Returns: The condition, never `NULL`.
    /// - Throws: ``ODataError`` for an unknown field, mismatched types, or a filter that is not a condition.
    public func predicate(_ filter: ODataExpression) throws(ODataError) -> SQLFragment {
        let typed = try value(filter)
        switch typed.type {
        case .bool, .dynamic:
            return typed.isNullable || typed.type == .dynamic
                ? SQLFragment("(") + typed.sql + SQLFragment(" IS TRUE)") : typed.sql
        case .null: return SQLFragment("(1 = 0)")
        default: throw ODataError("the filter must be a condition, not a \(typed.type.name)")
        }
    }

    /// The terms of an `ORDER BY` clause (without the keywords), nulls first when ascending and last
    /// when descending on both databases, strings in code-point order — or, for a column with a collation, in the
    /// code-point order of their keys (``SQLColumn/collationKeyColumn``).
    ///
    /// - Parameter orderings: The sort keys.
    /// - Returns: The comma-separated terms.
    /// - Throws: ``ODataError`` for an unknown field.
    public func orderBy(_ orderings: [ODataOrdering]) throws(ODataError) -> SQLFragment {
        var terms: [SQLFragment] = []
        for ordering in orderings {
            var column = try resolve(ordering.field)
            if let keyColumn = column.collationKeyColumn {
                column = SQLColumn(name: keyColumn, type: .string, isNullable: column.isNullable)
            }
            var term = try quoted(column)
            if dialect == .postgres, column.type == .string || column.type == .json {
                term += SQLFragment(" COLLATE \"C\"")
            }
            // PostgreSQL puts nulls last when ascending; say otherwise only where a null can occur, so
            // that plain indexes still serve the order of columns that are never null (id, updatedAt).
            let nulls = dialect == .postgres && column.isNullable
            switch ordering.direction {
            case .ascending: term += SQLFragment(nulls ? " ASC NULLS FIRST" : " ASC")
            case .descending: term += SQLFragment(nulls ? " DESC NULLS LAST" : " DESC")
            }
            terms.append(term)
        }
        return SQLFragment.joined(terms, separator: ", ")
    }

    /// The column a field resolves to, quoted.
    ///
    /// - Parameter field: A field name.
    /// - Returns: The quoted column and its description.
    /// - Throws: ``ODataError`` for an unknown field or a name that is not a valid identifier.
    public func column(_ field: String) throws(ODataError) -> (sql: SQLFragment, column: SQLColumn) {
        let column = try resolve(field)
        return (try quoted(column), column)
    }

    /// The key column of `column`, quoted as `column` would be.
    func column(_ keyColumn: String, as column: SQLColumn) throws(ODataError) -> SQLFragment {
        try quoted(SQLColumn(name: keyColumn, type: .string, isNullable: column.isNullable))
    }

    private func resolve(_ field: String) throws(ODataError) -> SQLColumn {
        guard let column = resolveColumn(field) else { throw ODataError("unknown field '\(field)'") }
        return column
    }

    private func quoted(_ column: SQLColumn) throws(ODataError) -> SQLFragment {
        if let expression = column.expression { return SQLFragment(expression) }
        guard let identifier = dialect.quotedIdentifier(column.name) else {
            throw ODataError("'\(column.name)' is not a valid column name")
        }
        return SQLFragment(identifier)
    }
}

/// The type of a translated expression.
enum SQLValueType: Equatable {
    case string, integer, double, bool, date, json, dynamic, null

    init(_ column: SQLColumnType) {
        switch column {
        case .dynamic: self = .dynamic
        case .string: self = .string
        case .integer: self = .integer
        case .double: self = .double
        case .bool: self = .bool
        case .date: self = .date
        case .json: self = .json
        }
    }

    var isNumeric: Bool { self == .integer || self == .double }

    var name: String {
        switch self {
        case .string: "string"
        case .integer, .double: "number"
        case .bool: "Boolean"
        case .date: "date"
        case .json: "JSON value"
        case .dynamic: "value"
        case .null: "null"
        }
    }
}

/// A translated expression: its SQL, its type, whether it can be `NULL`, and the literal it came
/// from, if any.
struct TypedSQL {
    var sql: SQLFragment
    var type: SQLValueType
    var isNullable: Bool
    var literal: ODataLiteral?
}
