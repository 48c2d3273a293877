import Foundation
import SyncCore

/// A token of `$filter` text.
enum ODataToken: Equatable {
    /// A name: keyword, function or member path (`a/b`).
    case identifier(String)
    case string(String)
    /// A number: its text, whether it had a fraction or exponent, and whether it had a suffix.
    case number(text: String, isInteger: Bool)
    /// `datetime'…'`, `datetimeoffset'…'`, `guid'…'`: the prefix and the quoted text.
    case typed(prefix: String, text: String)
    /// An OData v4 literal written without quotes (`2012-09-03T13:52Z`, `2012-09-03`, a GUID, `11:22:33`), read
    /// only where the lexer takes them (``ODataLexer/readsBareLiterals``).
    case bare(ODataBareLiteral, text: String)
    case leftParenthesis, rightParenthesis, comma, minus
    case end

    var display: String {
        switch self {
        case .identifier(let name): "'\(name)'"
        case .string: "string literal"
        case .number(let text, _): "'\(text)'"
        case .typed(let prefix, _): "\(prefix) literal"
        case .bare(let kind, _): "\(kind.rawValue) literal"
        case .leftParenthesis: "'('"
        case .rightParenthesis: "')'"
        case .comma: "','"
        case .minus: "'-'"
        case .end: "end of filter"
        }
    }
}

/// The OData v4 literals that are written bare, as the ABNF's `dateTimeOffsetValue`, `dateValue`, `guidValue`
/// and `timeOfDayValue` name them.
enum ODataBareLiteral: String {
    case dateTimeOffset = "DateTimeOffset"
    case date = "Date"
    case guid = "Guid"
    case timeOfDay = "TimeOfDay"
}

/// Splits `$filter` text into tokens on demand.
struct ODataLexer {
    let scalars: [Unicode.Scalar]
    /// Whether OData v4's unquoted literals are read (the v3 dialect); otherwise `2012-09-03` is `2012` and a minus.
    let readsBareLiterals: Bool
    private(set) var index = 0

    init(_ text: String, readsBareLiterals: Bool = false) {
        scalars = Array(text.unicodeScalars)
        self.readsBareLiterals = readsBareLiterals
    }

    private func isIdentifierStart(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII && (scalar.properties.isAlphabetic || scalar == "_")
    }

    private func isIdentifierPart(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_")
    }

    private func isDigit(_ scalar: Unicode.Scalar) -> Bool { ("0"..."9").contains(scalar) }

    mutating func skipWhitespace() {
        while index < scalars.count, scalars[index].properties.isWhitespace { index += 1 }
    }

    /// The next token and the position where it starts.
    mutating func next() throws(ODataError) -> (token: ODataToken, position: Int) {
        skipWhitespace()
        let start = index
        guard index < scalars.count else { return (.end, start) }
        let scalar = scalars[index]
        switch scalar {
        case "(": index += 1; return (.leftParenthesis, start)
        case ")": index += 1; return (.rightParenthesis, start)
        case ",": index += 1; return (.comma, start)
        case "-": index += 1; return (.minus, start)
        case "'": return (.string(try quoted()), start)
        default: break
        }
        if readsBareLiterals, let bare = try bareLiteral() { return (bare, start) }
        if isDigit(scalar) { return (try number(), start) }
        if isIdentifierStart(scalar) {
            let name = try identifier()
            if index < scalars.count, scalars[index] == "'",
                ["datetime", "datetimeoffset", "guid"].contains(name.lowercased())
            {
                return (.typed(prefix: name.lowercased(), text: try quoted()), start)
            }
            return (.identifier(name), start)
        }
        throw ODataError("unexpected character '\(scalar.escaped(asASCII: false))'", position: start)
    }

    /// A member path: identifiers separated by `/`.
    private mutating func identifier() throws(ODataError) -> String {
        var name = ""
        while true {
            while index < scalars.count, isIdentifierPart(scalars[index]) {
                name.unicodeScalars.append(scalars[index])
                index += 1
            }
            guard index < scalars.count, scalars[index] == "/" else { return name }
            name.unicodeScalars.append("/")
            index += 1
            guard index < scalars.count, isIdentifierStart(scalars[index]) else {
                throw ODataError("expected a name after '/'", position: index)
            }
        }
    }

    /// A quoted string; `''` stands for one quote.
    private mutating func quoted() throws(ODataError) -> String {
        let start = index
        index += 1
        var text = ""
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            if scalar == "'" {
                if index < scalars.count, scalars[index] == "'" {
                    text.unicodeScalars.append("'")
                    index += 1
                } else {
                    return text
                }
            } else if scalar == "\0" {
                // PostgreSQL text cannot hold NUL: refused everywhere, so that every store answers alike.
                throw ODataError("string literals cannot contain U+0000 (NUL)", position: index - 1)
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        throw ODataError("unterminated string literal", position: start)
    }

    /// `12`, `12L`, `1.5`, `1e3`, `5.99d`, `50f`, `1.99m`.
    private mutating func number() throws(ODataError) -> ODataToken {
        let start = index
        var isInteger = true
        while index < scalars.count, isDigit(scalars[index]) { index += 1 }
        if index + 1 < scalars.count, scalars[index] == ".", isDigit(scalars[index + 1]) {
            isInteger = false
            index += 1
            while index < scalars.count, isDigit(scalars[index]) { index += 1 }
        }
        if index < scalars.count, scalars[index] == "e" || scalars[index] == "E" {
            var lookahead = index + 1
            if lookahead < scalars.count, scalars[lookahead] == "+" || scalars[lookahead] == "-" { lookahead += 1 }
            if lookahead < scalars.count, isDigit(scalars[lookahead]) {
                isInteger = false
                index = lookahead
                while index < scalars.count, isDigit(scalars[index]) { index += 1 }
            }
        }
        var text = String(String.UnicodeScalarView(scalars[start..<index]))
        if index < scalars.count {
            switch scalars[index] {
            case "L", "l":
                if isInteger { index += 1 }
            case "m", "M", "d", "D", "f", "F":
                index += 1
                isInteger = false
            default: break
            }
        }
        if index < scalars.count, isIdentifierPart(scalars[index]) {
            throw ODataError("invalid number", position: start)
        }
        if !isInteger, !text.contains("."), !text.contains("e"), !text.contains("E") { text += ".0" }
        return .number(text: text, isInteger: isInteger)
    }

    /// An unquoted v4 literal at the current position, or nil (nothing consumed) when none starts here:
    /// a GUID (`01234567-89ab-cdef-0123-456789abcdef`), a date (`2012-09-03`), a date and time with its offset
    /// (`2012-09-03T13:52Z`, `2012-08-31T18:19:22.1+02:00`) or a time of day (`11:22:33`). Four digits and a
    /// `-` begin a date, and two digits and a `:` a time: such text that is not one is an error, not a number.
    private mutating func bareLiteral() throws(ODataError) -> ODataToken? {
        let start = index
        func isHex(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.isASCIIHexDigit }
        func run(from position: Int, _ accepts: (Unicode.Scalar) -> Bool) -> Int {
            var end = position
            while end < scalars.count, accepts(scalars[end]) { end += 1 }
            return end - position
        }
        func text(to end: Int) -> String { String(String.UnicodeScalarView(scalars[start..<end])) }
        func endsThere(_ end: Int) -> Bool { end >= scalars.count || !isIdentifierPart(scalars[end]) }

        // A GUID: 8-4-4-4-12 hexadecimal digits.
        var position = start
        var isGUID = true
        for (number, width) in [8, 4, 4, 4, 12].enumerated() {
            guard run(from: position, isHex) == width,
                number == 4 || (position + width < scalars.count && scalars[position + width] == "-")
            else {
                isGUID = false
                break
            }
            position += width + (number == 4 ? 0 : 1)
        }
        if isGUID, endsThere(position) {
            index = position
            return .bare(.guid, text: text(to: position))
        }
        let digits = run(from: start, isDigit)
        let next = start + digits < scalars.count ? scalars[start + digits] : nil
        if digits == 4, next == "-" {
            // A date, then maybe "T" and a time with its offset.
            var end = start + digits
            while end < scalars.count, isIdentifierPart(scalars[end]) || "-:.+".unicodeScalars.contains(scalars[end]) {
                end += 1
            }
            index = end
            let literal = text(to: end)
            return .bare(literal.contains("T") ? .dateTimeOffset : .date, text: literal)
        }
        if digits == 2, next == ":" {
            var end = start + digits
            while end < scalars.count, isDigit(scalars[end]) || scalars[end] == ":" || scalars[end] == "." {
                end += 1
            }
            index = end
            return .bare(.timeOfDay, text: text(to: end))
        }
        return nil
    }

    /// The raw text of an unquoted `cast(` argument, up to (not including) the next `,`.
    mutating func rawArgument() -> String {
        skipWhitespace()
        var text = ""
        while index < scalars.count, scalars[index] != ",", scalars[index] != ")" {
            text.unicodeScalars.append(scalars[index])
            index += 1
        }
        return text.trimmingASCIIWhitespace()
    }
}
