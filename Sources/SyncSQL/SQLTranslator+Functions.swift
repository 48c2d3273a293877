import Foundation
import SyncCore
import SyncOData

extension SQLTranslator {
    func call(_ function: ODataFunction, _ arguments: [TypedSQL]) throws(ODataError) -> TypedSQL {
        switch function {
        case .substringof:
            return try match(.contains, field: arguments[1], needle: arguments[0], function: function)
        case .contains:
            return try match(.contains, field: arguments[0], needle: arguments[1], function: function)
        case .startswith:
            return try match(.prefix, field: arguments[0], needle: arguments[1], function: function)
        case .endswith:
            return try match(.suffix, field: arguments[0], needle: arguments[1], function: function)
        case .length:
            try require(arguments, [.string], function)
            return derived(SQLFragment("length(") + arguments[0].sql + SQLFragment(")"), .integer, arguments)
        case .indexof:
            try require(arguments, [.string, .string], function)
            let position = dialect == .sqlite ? "instr(" : "strpos("
            return derived(
                SQLFragment("(\(position)") + arguments[0].sql + SQLFragment(", ") + arguments[1].sql
                    + SQLFragment(") - 1)"), .integer, arguments)
        case .substring:
            try require(arguments, [.string, .integer, .integer], function)
            var sql =
                SQLFragment("substr(") + arguments[0].sql + SQLFragment(", ") + clampedInt(arguments[1].sql)
                + SQLFragment(" + 1")
            if arguments.count == 3 { sql += SQLFragment(", ") + clampedInt(arguments[2].sql) }
            return derived(sql + SQLFragment(")"), .string, arguments)
        case .tolower, .toupper:
            try require(arguments, [.string], function)
            let name = function == .tolower ? dialect.lowercaseFunction : dialect.uppercaseFunction
            var sql = SQLFragment("\(name)(") + arguments[0].sql + SQLFragment(")")
            if dialect == .postgres, function == .toupper {
                // PostgreSQL maps case one character to one: ß stays ß where Swift (and SQLite here) give SS.
                sql = SQLFragment("replace(") + sql + SQLFragment(", 'ß', 'SS')")
            }
            return derived(sql, .string, arguments)
        case .trim:
            try require(arguments, [.string], function)
            return derived(SQLFragment("trim(") + arguments[0].sql + SQLFragment(")"), .string, arguments)
        case .replace:
            try require(arguments, [.string, .string, .string], function)
            return derived(
                SQLFragment("replace(") + arguments[0].sql + SQLFragment(", ") + arguments[1].sql + SQLFragment(", ")
                    + arguments[2].sql + SQLFragment(")"), .string, arguments)
        case .concat:
            try require(arguments, [.string, .string], function)
            return derived(
                SQLFragment("(") + arguments[0].sql + SQLFragment(" || ") + arguments[1].sql + SQLFragment(")"),
                .string, arguments)
        case .year, .month, .day, .hour, .minute, .second:
            try require(arguments, [.date], function)
            return derived(datePart(function, arguments[0]), .integer, arguments)
        case .round, .floor, .ceiling:
            guard arguments[0].type.isNumeric || arguments[0].type == .null || arguments[0].type == .dynamic else {
                throw ODataError("function '\(function.rawValue)' needs a number, not a \(arguments[0].type.name)")
            }
            if arguments[0].type != .double, arguments[0].type != .dynamic { return arguments[0] }
            return derived(rounding(function, arguments[0].sql), .double, arguments)
        }
    }

    /// A value computed from `arguments`: null when any of them can be.
    private func derived(_ sql: SQLFragment, _ type: SQLValueType, _ arguments: [TypedSQL]) -> TypedSQL {
        TypedSQL(sql: sql, type: type, isNullable: arguments.contains(where: \.isNullable))
    }

    private func require(_ arguments: [TypedSQL], _ types: [SQLValueType], _ function: ODataFunction)
        throws(ODataError)
    {
        for (index, argument) in arguments.enumerated() where argument.type != .null && argument.type != .dynamic {
            let expected = types[index]
            guard argument.type == expected else {
                let wanted = expected == .integer ? "an integer" : "a \(expected.name)"
                let got =
                    argument.type == .double && expected == .integer ? "a fractional number" : "a \(argument.type.name)"
                throw ODataError("argument \(index + 1) of '\(function.rawValue)' must be \(wanted), not \(got)")
            }
        }
    }

    /// An integer argument clamped to 0…2³¹−2, so that both databases accept it as a position.
    private func clampedInt(_ sql: SQLFragment) -> SQLFragment {
        SQLFragment("CAST(CASE WHEN ") + sql + SQLFragment(" < 0 THEN 0 WHEN ") + sql
            + SQLFragment(" > 2147483646 THEN 2147483646 ELSE ") + sql + SQLFragment(" END AS INTEGER)")
    }

    private enum MatchKind { case contains, prefix, suffix }

    /// `contains`, `startswith` and `endswith`: a pattern match when the needle is a literal (GLOB on
    /// SQLite, LIKE on PostgreSQL, both case-sensitive and escaped), position arithmetic otherwise.
    private func match(_ kind: MatchKind, field: TypedSQL, needle: TypedSQL, function: ODataFunction)
        throws(ODataError) -> TypedSQL
    {
        try require([field, needle], [.string, .string], function)
        if field.type == .null || needle.type == .null { return condition(SQLFragment("(1 = 0)")) }
        let sql: SQLFragment
        if case .string(let text)? = needle.literal {
            let escaped = dialect == .sqlite ? Self.escapeGlob(text) : Self.escapeLike(text)
            let any = dialect == .sqlite ? "*" : "%"
            let pattern: String
            switch kind {
            case .contains: pattern = any + escaped + any
            case .prefix: pattern = escaped + any
            case .suffix: pattern = any + escaped
            }
            let op = dialect == .sqlite ? " GLOB " : " LIKE "
            let escapeClause = dialect == .sqlite ? ")" : " ESCAPE '\\')"
            sql =
                SQLFragment("(") + field.sql + SQLFragment(op) + SQLFragment(parameter: .text(pattern))
                + SQLFragment(escapeClause)
        } else {
            let (f, s) = (field.sql, needle.sql)
            switch kind {
            case .contains:
                let position = dialect == .sqlite ? "instr(" : "strpos("
                sql = SQLFragment("(\(position)") + f + SQLFragment(", ") + s + SQLFragment(") > 0)")
            case .prefix:
                sql =
                    SQLFragment("(substr(") + f + SQLFragment(", 1, length(") + s + SQLFragment(")) = ") + s
                    + SQLFragment(")")
            case .suffix:
                sql =
                    SQLFragment("(length(") + f + SQLFragment(") >= length(") + s + SQLFragment(") AND substr(")
                    + f + SQLFragment(", length(") + f + SQLFragment(") - length(") + s + SQLFragment(") + 1) = ")
                    + s + SQLFragment(")")
            }
        }
        if field.isNullable || needle.isNullable {
            return condition(SQLFragment("COALESCE(") + sql + SQLFragment(", FALSE)"))
        }
        return condition(sql)
    }

    private func datePart(_ function: ODataFunction, _ argument: TypedSQL) -> SQLFragment {
        let sql = argument.sql
        switch dialect {
        case .sqlite:
            let format: String
            switch function {
            case .year: format = "%Y"
            case .month: format = "%m"
            case .day: format = "%d"
            case .hour: format = "%H"
            case .minute: format = "%M"
            default: format = "%S"
            }
            if argument.type == .dynamic {  // a wire-date string, which strftime reads as it is
                return SQLFragment("CAST(strftime('\(format)', ") + sql + SQLFragment(") AS INTEGER)")
            }
            return SQLFragment("CAST(strftime('\(format)', ") + sql + SQLFragment(" / 1000.0, 'unixepoch') AS INTEGER)")
        case .postgres:
            let field = function.rawValue.uppercased()
            return SQLFragment("CAST(FLOOR(EXTRACT(\(field) FROM to_timestamp(") + sql
                + SQLFragment(" / 1000.0) AT TIME ZONE 'UTC')) AS BIGINT)")
        }
    }

    private func rounding(_ function: ODataFunction, _ sql: SQLFragment) -> SQLFragment {
        switch (function, dialect) {
        case (.round, .sqlite):
            return SQLFragment("round(") + sql + SQLFragment(")")
        case (.round, .postgres):
            return SQLFragment("CAST(round(CAST(") + sql + SQLFragment(" AS NUMERIC)) AS DOUBLE PRECISION)")
        case (.floor, .postgres):
            return SQLFragment("floor(") + sql + SQLFragment(")")
        case (_, .postgres):
            return SQLFragment("ceil(") + sql + SQLFragment(")")
        case (.floor, .sqlite):
            // No math functions assumed: truncate, then step down for negative fractions.
            return SQLFragment("CAST((CASE WHEN ") + sql + SQLFragment(" < CAST(") + sql
                + SQLFragment(" AS INTEGER) THEN CAST(") + sql + SQLFragment(" AS INTEGER) - 1 ELSE CAST(") + sql
                + SQLFragment(" AS INTEGER) END) AS REAL)")
        default:
            return SQLFragment("CAST((CASE WHEN ") + sql + SQLFragment(" > CAST(") + sql
                + SQLFragment(" AS INTEGER) THEN CAST(") + sql + SQLFragment(" AS INTEGER) + 1 ELSE CAST(") + sql
                + SQLFragment(" AS INTEGER) END) AS REAL)")
        }
    }

    /// Escapes `%`, `_` and the escape character `\` for a LIKE pattern with `ESCAPE '\'`.
    ///
    /// Decided per Unicode scalar, as the database reads the pattern — on the UTF-8 bytes, where an ASCII byte is
    /// always a scalar of its own: per `Character`, a `%` followed by a combining mark (or a `\` after a prepended
    /// mark) is one grapheme, not the wildcard, and would go through unescaped.
    /// - Parameter text: Literal text to match.
    /// - Returns: The text with each special character preceded by `\`.
    public static func escapeLike(_ text: String) -> String {
        escaping(text) { byte, output in
            if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "\\") {
                output.append(UInt8(ascii: "\\"))
            }
            output.append(byte)
        }
    }

    /// Escapes `*`, `?` and `[` for a SQLite GLOB pattern by enclosing each in brackets, per Unicode scalar (as
    /// ``escapeLike(_:)``).
    ///
    /// - Parameter text: Literal text to match.
    /// - Returns: The text with each special character bracketed.
    public static func escapeGlob(_ text: String) -> String {
        escaping(text) { byte, output in
            if byte == UInt8(ascii: "*") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "[") {
                output.append(contentsOf: [UInt8(ascii: "["), byte, UInt8(ascii: "]")])
            } else {
                output.append(byte)
            }
        }
    }

    /// `text` with each UTF-8 byte given to `escape`, which appends what stands for it. (Appending scalars to a
    /// `String.UnicodeScalarView` took time quadratic in a megabyte of marks.)
    private static func escaping(_ text: String, _ escape: (UInt8, inout [UInt8]) -> Void) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count + 16)
        for byte in text.utf8 { escape(byte, &output) }
        return String(decoding: output, as: UTF8.self)
    }
}
