import Foundation
public import SyncCore

extension ODataExpression {
    /// The most nodes a parsed filter may have; more is refused as too complex.
    public static let maximumNodeCount = 1000
    /// The deepest nesting of parentheses and unary operators a parsed filter may have.
    public static let maximumNesting = 100

    /// Parses `$filter` text (PROTOCOL.md §4).
    ///
    /// For example:
    /// ```swift
    /// let filter = try ODataExpression(parsing: "startswith(name,'b') and (Count add 200) gt 350")
    /// ```
    /// - Parameters:
    ///   - text: The filter, already percent-decoded.
    ///   - dialect: The syntax it is written in; v2's (OData v3) by default.
    /// - Throws: ``ODataError`` saying what is wrong and where, such as
    ///   `unexpected token 'eq' at position 14`.
    public init(parsing text: String, dialect: ODataDialect = .v2) throws(ODataError) {
        var parser = try ODataParser(text, dialect: dialect)
        self = try parser.parseFilter()
    }
}

/// A recursive-descent parser for `$filter`, precedence climbing from `or` up to unary operators.
struct ODataParser {
    private let dialect: ODataDialect
    private var lexer: ODataLexer
    private var token: ODataToken
    private var position: Int
    private var nodeCount = 0
    private var nesting = 0

    private static let keywords: Set<String> = Set(ODataBinaryOperator.allCases.map(\.rawValue))
        .union(["not", "true", "false", "null"])

    init(_ text: String, dialect: ODataDialect) throws(ODataError) {
        self.dialect = dialect
        lexer = ODataLexer(text, readsBareLiterals: dialect == .v3)
        (token, position) = try lexer.next()
    }

    mutating func parseFilter() throws(ODataError) -> ODataExpression {
        guard token != .end else { throw ODataError("empty filter", position: position) }
        let expression = try parseBinary(minimumPrecedence: 1)
        guard token == .end else { throw unexpected() }
        return expression
    }

    private mutating func advance() throws(ODataError) {
        (token, position) = try lexer.next()
    }

    private func unexpected() -> ODataError {
        if token == .end { return ODataError("unexpected end of filter", position: position) }
        return ODataError("unexpected token \(token.display)", position: position)
    }

    private mutating func countNode() throws(ODataError) {
        nodeCount += 1
        if nodeCount > ODataExpression.maximumNodeCount {
            throw ODataError("filter has more than \(ODataExpression.maximumNodeCount) terms", position: position)
        }
    }

    private mutating func nest() throws(ODataError) {
        nesting += 1
        if nesting > ODataExpression.maximumNesting {
            throw ODataError("filter nests deeper than \(ODataExpression.maximumNesting)", position: position)
        }
    }

    private var binaryOperator: ODataBinaryOperator? {
        guard case .identifier(let name) = token else { return nil }
        return ODataBinaryOperator(rawValue: name)
    }

    /// Left-associative precedence climbing over the binary operators.
    private mutating func parseBinary(minimumPrecedence: Int) throws(ODataError) -> ODataExpression {
        var left = try parseUnary()
        while let op = binaryOperator, op.precedence >= minimumPrecedence {
            try advance()
            let right = try parseBinary(minimumPrecedence: op.precedence + 1)
            try countNode()
            left = .binary(op, left, right)
        }
        return left
    }

    private mutating func parseUnary() throws(ODataError) -> ODataExpression {
        try nest()
        defer { nesting -= 1 }
        if token == .identifier("not") {
            try advance()
            let operand = try parseUnary()
            try countNode()
            return .not(operand)
        }
        if token == .minus {
            let minusEnd = lexer.index
            try advance()
            // A number right after '-' is a negative literal; anything else is a negation.
            if case .number(let text, let isInteger) = token, position == minusEnd {
                let start = position
                try advance()
                return .literal(try Self.number("-" + text, isInteger: isInteger, at: start))
            }
            let operand = try parseUnary()
            try countNode()
            return .negate(operand)
        }
        let primary = try parsePrimary()
        if dialect == .v3, token == .identifier("in") { return try parseIn(primary) }
        return primary
    }

    /// `value in (a, b, …)` (OData v4), read as `(value eq a) or (value eq b) …`: a list of one or more
    /// literals. Each copy of `value` counts its nodes against the filter's limit, so that a large value in a
    /// long list cannot make a query far larger than its text.
    private mutating func parseIn(_ value: ODataExpression) throws(ODataError) -> ODataExpression {
        try advance()  // 'in'
        try expect(.leftParenthesis)
        var result: ODataExpression?
        while true {
            let start = position
            let item = try parseUnary()
            guard case .literal = item else { throw ODataError("'in' takes a list of literals", position: start) }
            try countNode()
            if result != nil {
                for _ in 0..<Self.size(of: value) { try countNode() }
            }
            let test = ODataExpression.binary(.eq, value, item)
            result = result.map { .binary(.or, $0, test) } ?? test
            guard token == .comma else { break }
            try advance()
        }
        try expect(.rightParenthesis)
        guard let result else { throw unexpected() }
        return result
    }

    /// The nodes of `expression`.
    private static func size(of expression: ODataExpression) -> Int {
        switch expression {
        case .literal, .member: 1
        case .not(let operand), .negate(let operand): 1 + size(of: operand)
        case .binary(_, let left, let right): 1 + size(of: left) + size(of: right)
        case .function(_, let arguments): 1 + arguments.map(size(of:)).reduce(0, +)
        }
    }

    private mutating func parsePrimary() throws(ODataError) -> ODataExpression {
        try countNode()
        let start = position
        switch token {
        case .leftParenthesis:
            try advance()
            let inner = try parseBinary(minimumPrecedence: 1)
            try expect(.rightParenthesis)
            return inner
        case .string(let text):
            try advance()
            return .literal(.string(text))
        case .number(let text, let isInteger):
            try advance()
            return .literal(try Self.number(text, isInteger: isInteger, at: start))
        case .typed(let prefix, let text):
            if dialect == .v3 {
                throw ODataError(
                    "\(prefix)'…' is OData v3 syntax; under ZUMO-API-VERSION 3.0 write dates as "
                        + "2024-01-31T12:00:00.000Z or cast(2024-01-31T12:00:00.000Z,Edm.DateTimeOffset) and guids "
                        + "without quotes or as strings",
                    position: start)
            }
            try advance()
            return .literal(try Self.typedLiteral(prefix: prefix, text: text, at: start))
        case .bare(let kind, let text):
            try advance()
            return .literal(try Self.bareLiteral(kind, text: text, at: start))
        case .identifier(let name):
            try advance()
            switch name {
            case "true": return .literal(.bool(true))
            case "false": return .literal(.bool(false))
            case "null": return .literal(.null)
            default: break
            }
            if token == .leftParenthesis { return try parseCall(name, at: start) }
            if Self.keywords.contains(name) { throw ODataError("unexpected token '\(name)'", position: start) }
            return .member(name)
        default:
            throw unexpected()
        }
    }

    private mutating func parseCall(_ name: String, at start: Int) throws(ODataError) -> ODataExpression {
        if name == "cast" { return try parseCast() }
        guard let function = ODataFunction(rawValue: name) else {
            throw ODataError("unknown function '\(name)'", position: start)
        }
        if dialect == .v3, function == .substringof {
            throw ODataError(
                "substringof is OData v3 syntax; under ZUMO-API-VERSION 3.0 write contains(field,'text')",
                position: start)
        }
        try advance()  // '('
        var arguments: [ODataExpression] = []
        if token != .rightParenthesis {
            while true {
                arguments.append(try parseBinary(minimumPrecedence: 1))
                guard token == .comma else { break }
                try advance()
            }
        }
        try expect(.rightParenthesis)
        guard function.arity.contains(arguments.count) else {
            let expected =
                function.arity.count == 1
                ? "\(function.arity.lowerBound)" : "\(function.arity.lowerBound) or \(function.arity.upperBound)"
            throw ODataError(
                "function '\(name)' takes \(expected) argument\(function.arity.upperBound == 1 ? "" : "s"), "
                    + "not \(arguments.count)",
                position: start
            )
        }
        return .function(function, arguments)
    }

    /// `cast('2012-05-21T00:00:29.300Z',Edm.DateTimeOffset)`, with or without the quotes.
    private mutating func parseCast() throws(ODataError) -> ODataExpression {
        // The token after `cast` is '(' and the lexer stands just past it.
        var text: String
        let argumentStart = lexer.index
        var probe = lexer
        if case (.string(let quoted), _) = try probe.next() {
            lexer = probe
            text = quoted
        } else {
            text = lexer.rawArgument()
        }
        try advance()
        guard token == .comma else { throw unexpected() }
        try advance()
        let supported =
            dialect == .v3
            ? "only cast(…,Edm.DateTimeOffset), cast(…,Edm.Date) and cast(…,Edm.Guid) are supported"
            : "only cast(…,Edm.DateTimeOffset) is supported"
        guard token == .identifier("Edm") else { throw ODataError(supported, position: position) }
        // `Edm.DateTimeOffset` lexes as 'Edm' followed by an unexpected '.'; read the rest by hand.
        let typeName = "Edm" + lexer.rawArgument()
        let typePosition = position
        try advance()
        try expect(.rightParenthesis)
        text = text.trimmingASCIIWhitespace()
        switch typeName {
        case "Edm.DateTimeOffset":
            // The Datasync client writes WireDate's form; OData v4's own (no seconds, 12 fraction digits) is read too.
            guard let date = WireDate(parsing: text) ?? WireDate(parsing: Self.wireText(ofV4: text)) else {
                throw ODataError("invalid date in cast", position: argumentStart)
            }
            return .literal(.date(date, .cast))
        case "Edm.Date" where dialect == .v3:
            return .literal(try Self.bareLiteral(.date, text: text, at: argumentStart))
        case "Edm.Guid" where dialect == .v3:
            guard Self.isGUID(text) else { throw ODataError("invalid guid in cast", position: argumentStart) }
            return .literal(.guid(text))
        default:
            throw ODataError(supported, position: typePosition)
        }
    }

    private mutating func expect(_ expected: ODataToken) throws(ODataError) {
        guard token == expected else {
            if token == .end {
                throw ODataError("unexpected end of filter, expected \(expected.display)", position: position)
            }
            throw ODataError("unexpected token \(token.display), expected \(expected.display)", position: position)
        }
        try advance()
    }

    static func number(_ text: String, isInteger: Bool, at position: Int) throws(ODataError) -> ODataLiteral {
        if isInteger {
            guard let value = Int64(text) else { throw ODataError("integer out of range", position: position) }
            return .int(value)
        }
        guard let value = Double(text), value.isFinite else {
            throw ODataError("number out of range", position: position)
        }
        return .double(value)
    }

    static func typedLiteral(prefix: String, text: String, at position: Int) throws(ODataError) -> ODataLiteral {
        switch prefix {
        case "guid":
            guard isGUID(text) else { throw ODataError("invalid guid literal", position: position) }
            return .guid(text)
        default:
            guard let date = WireDate(parsing: text) else {
                throw ODataError("invalid \(prefix) literal", position: position)
            }
            return .date(date, prefix == "datetime" ? .datetime : .datetimeoffset)
        }
    }

    /// An OData v4 literal written without quotes (ODataLexer reads them under v3). A date is its midnight in UTC,
    /// since date columns hold instants; a GUID compares as its text, as `guid'…'` does under v2. Time-of-day
    /// literals are refused: no column holds a time of day.
    static func bareLiteral(_ kind: ODataBareLiteral, text: String, at position: Int) throws(ODataError)
        -> ODataLiteral
    {
        let date: WireDate?
        switch kind {
        case .guid: return .guid(text)
        case .timeOfDay:
            throw ODataError(
                "TimeOfDay literals such as \(text) are not supported (no column holds a time of day); compare a "
                    + "date and time such as 2024-01-31T\(text)Z",
                position: position)
        case .date: date = text.utf8.count == 10 ? WireDate(parsing: text + "T00:00:00Z") : nil
        case .dateTimeOffset: date = WireDate(parsing: wireText(ofV4: text))
        }
        guard let date else {
            throw ODataError(
                "invalid \(kind.rawValue) literal '\(text)': write 2024-01-31, 2024-01-31T12:00Z or "
                    + "2024-01-31T12:00:00.000+01:00",
                position: position)
        }
        return .date(date, .cast)
    }

    /// OData v4's `dateTimeOffsetValue` in the form WireDate reads: seconds added where only hours and minutes are
    /// given (`2012-09-03T13:52Z` → `2012-09-03T13:52:00Z`), and fraction digits past the 7th dropped (the ABNF
    /// allows 12; they are far below a millisecond).
    static func wireText(ofV4 text: String) -> String {
        guard let separator = text.firstIndex(of: "T") else { return text }
        let time = text[text.index(after: separator)...]
        guard let offset = time.firstIndex(where: { $0 == "Z" || $0 == "+" || $0 == "-" }) else { return text }
        var clock = String(time[..<offset])
        if clock.filter({ $0 == ":" }).count == 1 { clock += ":00" }
        if let dot = clock.firstIndex(of: "."), clock.distance(from: dot, to: clock.endIndex) > 8 {
            clock = String(clock[...clock.index(dot, offsetBy: 7)])
        }
        return text[...separator] + clock + time[offset...]
    }

    private static func isGUID(_ text: String) -> Bool {
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        guard groups.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return groups.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }
}
