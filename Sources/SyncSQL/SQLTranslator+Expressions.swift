import Foundation
import SyncCore
import SyncOData

extension SQLTranslator {
    /// Translates any expression into a typed SQL value.
    func value(_ expression: ODataExpression) throws(ODataError) -> TypedSQL {
        switch expression {
        case .literal(let literal):
            return literalValue(literal)
        case .member(let field):
            let (sql, column) = try self.column(field)
            return TypedSQL(sql: sql, type: SQLValueType(column.type), isNullable: column.isNullable)
        case .not(let operand):
            return condition(SQLFragment("(NOT ") + (try predicate(operand)) + SQLFragment(")"))
        case .negate(let operand):
            let typed = Self.typedNull(try value(operand))
            guard typed.type.isNumeric || typed.type == .null || typed.type == .dynamic else {
                throw ODataError("'-' needs a number, not a \(typed.type.name)")
            }
            return TypedSQL(
                sql: SQLFragment("(- ") + typed.sql + SQLFragment(")"),
                type: typed.type == .null ? .integer : typed.type, isNullable: typed.isNullable)
        case .binary(.or, let left, let right):
            if let keyset = try keysetComparison(left, right) { return keyset }
            return try logicalList(.or, left, right)
        case .binary(let op, let left, let right) where op.isLogical:
            return try logicalList(op, left, right)
        case .binary(let op, let left, let right) where op.isComparison:
            if let (left, right) = try collated(left, right) { return try comparison(op, left, right) }
            return try comparison(op, try value(left), try value(right))
        case .binary(let op, let left, let right):
            return try arithmetic(op, try value(left), try value(right))
        case .function(let function, let arguments):
            return try call(function, try arguments.map { (argument) throws(ODataError) in try value(argument) })
        }
    }

    /// `left op right` for `and`/`or` as one flat list in one pair of parentheses: a left operand with
    /// the same operator joins the list instead of nesting. (A filter of 100 `or`s was 100 nested
    /// parentheses, past SQLite's parser stack: a 503 where PostgreSQL answered 200.)
    private func logicalList(_ op: ODataBinaryOperator, _ left: ODataExpression, _ right: ODataExpression)
        throws(ODataError) -> TypedSQL
    {
        var operands = [right]
        var rest = left
        while case .binary(op, let next, let last) = rest {
            if op == .or, try keysetComparison(next, last) != nil { break }  // rendered as one comparison
            operands.append(last)
            rest = next
        }
        operands.append(rest)
        var sql = SQLFragment("(")
        for (index, operand) in operands.reversed().enumerated() {
            if index > 0 { sql = sql + SQLFragment(op == .and ? " AND " : " OR ") }
            sql = sql + (try predicate(operand))
        }
        return condition(sql + SQLFragment(")"))
    }

    /// A two-valued condition (never `NULL`).
    func condition(_ sql: SQLFragment) -> TypedSQL {
        TypedSQL(sql: sql, type: .bool, isNullable: false)
    }

    private func parameter(_ value: SQLValue, cast: String) -> SQLFragment {
        dialect == .postgres ? SQLFragment(parameter: value) + SQLFragment("::" + cast) : SQLFragment(parameter: value)
    }

    func literalValue(_ literal: ODataLiteral) -> TypedSQL {
        let (sql, type): (SQLFragment, SQLValueType)
        switch literal {
        case .null: return TypedSQL(sql: SQLFragment("NULL"), type: .null, isNullable: true, literal: literal)
        case .bool(let bool): (sql, type) = (parameter(.bool(bool), cast: "boolean"), .bool)
        case .int(let int): (sql, type) = (parameter(.int(int), cast: "bigint"), .integer)
        case .double(let double): (sql, type) = (parameter(.double(double), cast: "double precision"), .double)
        case .string(let string), .guid(let string): (sql, type) = (parameter(.text(string), cast: "text"), .string)
        case .date(let date, _): (sql, type) = (parameter(.int(date.millisecondsSince1970), cast: "bigint"), .date)
        }
        return TypedSQL(sql: sql, type: type, isNullable: false, literal: literal)
    }

    // MARK: Comparisons

    /// A comparison's operands as collation keys, when one is a column with a collation and the other a string or a
    /// column with the same collation: the key column, and the string's key. Nil otherwise (binary).
    private func collated(_ left: ODataExpression, _ right: ODataExpression) throws(ODataError) -> (TypedSQL, TypedSQL)?
    {
        func column(_ expression: ODataExpression) throws(ODataError) -> SQLColumn? {
            guard case .member(let field) = expression else { return nil }
            return try self.column(field).column
        }
        func key(_ column: SQLColumn) throws(ODataError) -> TypedSQL? {
            guard let keyColumn = column.collationKeyColumn else { return nil }
            let sql = try self.column(keyColumn, as: column)
            return TypedSQL(sql: sql, type: .string, isNullable: column.isNullable)
        }
        func text(_ expression: ODataExpression, _ collation: Collation) -> TypedSQL? {
            guard case .literal(.string(let text)) = expression, let key = collation.key(text) else { return nil }
            return literalValue(.string(key))
        }
        switch (try column(left), try column(right)) {
        case (let left?, let right?):
            guard left.collation == right.collation, let leftKey = try key(left), let rightKey = try key(right) else {
                return nil
            }
            return (leftKey, rightKey)
        case (let column?, nil):
            guard let columnKey = try key(column), let textKey = text(right, column.collation) else { return nil }
            return (columnKey, textKey)
        case (nil, let column?):
            guard let columnKey = try key(column), let textKey = text(left, column.collation) else { return nil }
            return (textKey, columnKey)
        case (nil, nil):
            return nil
        }
    }

    private func comparison(_ op: ODataBinaryOperator, _ left: TypedSQL, _ right: TypedSQL) throws(ODataError)
        -> TypedSQL
    {
        if left.type == .null || right.type == .null {
            let other = left.type == .null ? right : left
            switch op {
            case .eq where other.type == .null: return condition(SQLFragment("(1 = 1)"))
            case .ne where other.type == .null: return condition(SQLFragment("(1 = 0)"))
            case .eq: return condition(SQLFragment("(") + other.sql + SQLFragment(" IS NULL)"))
            case .ne: return condition(SQLFragment("(") + other.sql + SQLFragment(" IS NOT NULL)"))
            default: return condition(SQLFragment("(1 = 0)"))
            }
        }
        let (left, right) = try comparable(left, right)
        let symbol: String
        switch op {
        case .eq: symbol = "="
        case .ne: symbol = "<>"
        case .gt: symbol = ">"
        case .ge: symbol = ">="
        case .lt: symbol = "<"
        default: symbol = "<="
        }
        var leftSQL = left.sql
        if dialect == .postgres, left.type == .string, op != .eq, op != .ne {
            leftSQL += SQLFragment(" COLLATE \"C\"")
        }
        if !left.isNullable && !right.isNullable {
            return condition(SQLFragment("(") + leftSQL + SQLFragment(" \(symbol) ") + right.sql + SQLFragment(")"))
        }
        switch (op, dialect) {
        case (.eq, .sqlite):
            return condition(SQLFragment("(") + leftSQL + SQLFragment(" IS ") + right.sql + SQLFragment(")"))
        case (.ne, .sqlite):
            return condition(SQLFragment("(") + leftSQL + SQLFragment(" IS NOT ") + right.sql + SQLFragment(")"))
        case (.eq, .postgres):
            return condition(
                SQLFragment("(") + leftSQL + SQLFragment(" IS NOT DISTINCT FROM ") + right.sql + SQLFragment(")"))
        case (.ne, .postgres):
            return condition(
                SQLFragment("(") + leftSQL + SQLFragment(" IS DISTINCT FROM ") + right.sql + SQLFragment(")"))
        default:
            return condition(
                SQLFragment("COALESCE((") + leftSQL + SQLFragment(" \(symbol) ") + right.sql
                    + SQLFragment("), FALSE)"))
        }
    }

    /// Checks that two values can be compared; a string literal compared with a date becomes a date.
    private func comparable(_ left: TypedSQL, _ right: TypedSQL) throws(ODataError) -> (TypedSQL, TypedSQL) {
        if left.type == .dynamic || right.type == .dynamic {
            // A dynamic value holds dates as wire strings: compare a date literal as its text.
            return (textDate(left) ?? left, textDate(right) ?? right)
        }
        if left.type == right.type, left.type != .json { return (left, right) }
        if left.type.isNumeric, right.type.isNumeric { return (left, right) }
        if left.type == .date, let date = dateLiteral(right) { return (left, date) }
        if right.type == .date, let date = dateLiteral(left) { return (date, right) }
        if left.type == .json || right.type == .json {
            throw ODataError("a JSON value can only be compared with null")
        }
        throw ODataError("cannot compare a \(left.type.name) with a \(right.type.name)")
    }

    private func textDate(_ typed: TypedSQL) -> TypedSQL? {
        guard case .date(let date, _)? = typed.literal else { return nil }
        return literalValue(.string(date.description))
    }

    private func dateLiteral(_ typed: TypedSQL) -> TypedSQL? {
        guard case .string(let text)? = typed.literal, let date = WireDate(parsing: text) else { return nil }
        return literalValue(.date(date, .datetimeoffset))
    }

    /// The keyset condition `(a gt x) or ((a eq x) and (b gt y))` — how clients page by a cursor — as
    /// the row-value comparison `((a, b) > (x, y))`, which both databases answer with one range scan
    /// of an index on `(a, b)`. (Written out, SQLite cannot tell that the two `x` parameters are equal
    /// and scans the whole index.) Nil when the expression is not that shape on non-nullable columns.
    private func keysetComparison(_ left: ODataExpression, _ right: ODataExpression) throws(ODataError) -> TypedSQL? {
        guard case .binary(.gt, .member(let first), .literal(let x)) = left,
            case .binary(
                .and, .binary(.eq, .member(let first2), .literal(let x2)),
                .binary(.gt, .member(let second), .literal(let y))) = right,
            first == first2, x == x2, x != .null, y != .null
        else { return nil }
        let (a, b) = (try value(.member(first)), try value(.member(second)))
        guard !a.isNullable, !b.isNullable else { return nil }
        let (a2, xValue) = try comparable(a, literalValue(x))
        let (b2, yValue) = try comparable(b, literalValue(y))
        var bSQL = b2.sql
        var aSQL = a2.sql
        if dialect == .postgres {
            if a2.type == .string { aSQL += SQLFragment(" COLLATE \"C\"") }
            if b2.type == .string { bSQL += SQLFragment(" COLLATE \"C\"") }
        }
        return condition(
            SQLFragment("((") + aSQL + SQLFragment(", ") + bSQL + SQLFragment(") > (") + xValue.sql + SQLFragment(", ")
                + yValue.sql + SQLFragment("))"))
    }

    // MARK: Arithmetic

    /// A bare `null` as an operand of arithmetic, typed: PostgreSQL cannot choose an operator for an untyped NULL
    /// (`- NULL`, `NULL + NULL`: "operator is not unique", a 500). Any other operand as it is.
    private static func typedNull(_ operand: TypedSQL) -> TypedSQL {
        guard operand.type == .null else { return operand }
        return TypedSQL(sql: SQLFragment("CAST(NULL AS BIGINT)"), type: .integer, isNullable: true)
    }

    private func arithmetic(_ op: ODataBinaryOperator, _ left: TypedSQL, _ right: TypedSQL) throws(ODataError)
        -> TypedSQL
    {
        let (left, right) = (Self.typedNull(left), Self.typedNull(right))
        for operand in [left, right] where !operand.type.isNumeric && operand.type != .null && operand.type != .dynamic
        {
            throw ODataError("'\(op.rawValue)' needs numbers, not a \(operand.type.name)")
        }
        let type: SQLValueType =
            left.type == .dynamic || right.type == .dynamic
            ? .dynamic : left.type == .double || right.type == .double ? .double : .integer
        let isNullable = left.isNullable || right.isNullable || op == .div || op == .mod
        let divisor = dialect == .postgres ? SQLFragment("NULLIF(") + right.sql + SQLFragment(", 0)") : right.sql
        var sql: SQLFragment
        switch op {
        case .add: sql = SQLFragment("(") + left.sql + SQLFragment(" + ") + right.sql + SQLFragment(")")
        case .sub: sql = SQLFragment("(") + left.sql + SQLFragment(" - ") + right.sql + SQLFragment(")")
        case .mul: sql = SQLFragment("(") + left.sql + SQLFragment(" * ") + right.sql + SQLFragment(")")
        case .div: sql = SQLFragment("(") + left.sql + SQLFragment(" / ") + divisor + SQLFragment(")")
        default:
            if type == .integer {
                sql = SQLFragment("(") + left.sql + SQLFragment(" % ") + divisor + SQLFragment(")")
            } else {
                // The remainder of a truncated division, with the dividend's sign, on both databases.
                let truncate = dialect == .postgres ? "trunc(" : "CAST(("
                let close = dialect == .postgres ? ")" : ") AS INTEGER)"
                sql =
                    SQLFragment("(") + left.sql + SQLFragment(" - ") + right.sql + SQLFragment(" * \(truncate)")
                    + left.sql + SQLFragment(" / ") + divisor + SQLFragment(close + ")")
            }
        }
        if dialect == .sqlite, type == .integer, [.add, .sub, .mul].contains(op) {
            // PostgreSQL fails an overflowing bigint; SQLite would quietly give a double. Fail on both.
            sql = SQLFragment("\(checkedIntegerFunction)(") + sql + SQLFragment(")")
        }
        return TypedSQL(sql: sql, type: type, isNullable: isNullable)
    }
}
