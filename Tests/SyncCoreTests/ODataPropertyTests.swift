import PropertyBased
import SyncCore
import SyncOData
import Testing

@Suite(.timeLimit(.minutes(3))) struct ODataPropertyTests {
    @Test func randomExpressionsSurviveRenderThenParse() async {
        await propertyCheck(count: 500, input: ODataGenerators.expression) { expression in
            let text = expression.odataText
            let parsed = try ODataExpression(parsing: text)
            #expect(parsed == expression, "\(text)")
        }
    }

    @Test func randomQueriesSurviveQueryStringThenParse() async {
        await propertyCheck(count: 200, input: ODataGenerators.query) { query in
            let parsed = try ODataQuery(parsing: query.queryString)
            #expect(parsed == query)
        }
    }

    @Test func randomTextNeverCrashesTheParser() async {
        await propertyCheck(count: 2000, input: ODataGenerators.filterText) { text in
            // Either it parses, and then renders to something that parses to the same tree, or it throws.
            if let expression = try? ODataExpression(parsing: text) {
                let reparsed = try ODataExpression(parsing: expression.odataText)
                #expect(reparsed == expression)
            }
            _ = try? ODataQuery(parsing: "$filter=" + text)
            _ = try? ODataQuery(parsing: text)
        }
    }
}

/// Random OData expressions, queries and near-miss filter text.
enum ODataGenerators {
    static let expression = Generator<ODataExpression, [ODataExpression]>(
        run: { rng in make(depth: 0, using: &rng) },
        shrink: { $0.children }
    )

    static let query = Generator<ODataQuery, Shrink.None<ODataQuery>> { rng in
        var query = ODataQuery()
        if Bool.random(using: &rng) { query.filter = make(depth: 0, using: &rng) }
        for _ in 0..<Int.random(in: 0...3, using: &rng) {
            query.orderBy.append(
                ODataOrdering(member(using: &rng), Bool.random(using: &rng) ? .ascending : .descending))
        }
        if Bool.random(using: &rng) { query.skip = Int.random(in: 0...10_000, using: &rng) }
        if Bool.random(using: &rng) { query.top = Int.random(in: 0...10_000, using: &rng) }
        if Bool.random(using: &rng) {
            query.select = (0...Int.random(in: 0...3, using: &rng)).map { _ in member(using: &rng) }
        }
        query.includeTotalCount = Bool.random(using: &rng)
        query.includeDeleted = Bool.random(using: &rng)
        return query
    }

    static let filterText = Generator<String, Shrink.None<String>> { rng in
        let pieces = [
            "name", "eq", "ne", "gt", "and", "or", "not", "(", ")", ",", "'", "''", "'x'", "-", "1", "1.5", "1e",
            "1L", "2d", "datetime'", "datetime'2020-01-01T00:00:00Z'", "guid'", "cast(", "Edm.DateTimeOffset",
            "startswith", "substring", "length", "null", "true", "/", "a/b", " ", "  ", "%", "é", "\u{0}", "$",
            "add", "mod", "-(", "9223372036854775808", "tolower(", "concat(", "'unterminated",
        ]
        return (0..<Int.random(in: 0...12, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    private static let members = ["name", "Count", "price", "_x", "a1", "address/city", "And", "createdAt"]

    static func member(using rng: inout any SeededRandomNumberGenerator) -> String {
        members.randomElement(using: &rng)!
    }

    static func literal(using rng: inout any SeededRandomNumberGenerator) -> ODataLiteral {
        switch Int.random(in: 0..<7, using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: .min ... .max, using: &rng))
        case 3:
            let double = Double(bitPattern: UInt64.random(in: .min ... .max, using: &rng))
            return .double(double.isFinite ? double : 0.5)
        case 4: return .string(JSONGenerators.randomString(using: &rng))
        case 5:
            let ms = Int64.random(in: -62_135_596_800_000...253_402_300_799_999, using: &rng)
            return .date(WireDate(millisecondsSince1970: ms), ODataDateStyle.allCases.randomElement(using: &rng)!)
        default:
            let hex = Array("0123456789abcdefABCDEF")
            let group = { (count: Int, rng: inout any SeededRandomNumberGenerator) in
                String((0..<count).map { _ in hex.randomElement(using: &rng)! })
            }
            return .guid([8, 4, 4, 4, 12].map { group($0, &rng) }.joined(separator: "-"))
        }
    }

    static func make(depth: Int, using rng: inout any SeededRandomNumberGenerator) -> ODataExpression {
        let choice = depth >= 4 ? Int.random(in: 0..<2, using: &rng) : Int.random(in: 0..<6, using: &rng)
        switch choice {
        case 0: return .literal(literal(using: &rng))
        case 1: return .member(member(using: &rng))
        case 2: return .not(make(depth: depth + 1, using: &rng))
        case 3: return .negate(make(depth: depth + 1, using: &rng))
        case 4:
            let op = ODataBinaryOperator.allCases.randomElement(using: &rng)!
            return .binary(op, make(depth: depth + 1, using: &rng), make(depth: depth + 1, using: &rng))
        default:
            let function = ODataFunction.allCases.randomElement(using: &rng)!
            let count = Int.random(in: function.arity, using: &rng)
            return .function(function, (0..<count).map { _ in make(depth: depth + 1, using: &rng) })
        }
    }
}

extension ODataExpression {
    /// Direct subexpressions, for shrinking a failing case.
    var children: [ODataExpression] {
        switch self {
        case .literal, .member: []
        case .not(let operand), .negate(let operand): [operand]
        case .binary(_, let left, let right): [left, right]
        case .function(_, let arguments): arguments
        }
    }
}
