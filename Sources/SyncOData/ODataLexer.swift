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
    case leftParenthesis, rightParenthesis, comma, minus
    case end

    var display: String {
        switch self {
        case .identifier(let name): "'\(name)'"
        case .string: "string literal"
        case .number(let text, _): "'\(text)'"
        case .typed(let prefix, _): "\(prefix) literal"
        case .leftParenthesis: "'('"
        case .rightParenthesis: "')'"
        case .comma: "','"
        case .minus: "'-'"
        case .end: "end of filter"
        }
    }
}

/// Splits `$filter` text into tokens on demand.
struct ODataLexer {
    let scalars: [Unicode.Scalar]
    private(set) var index = 0

    init(_ text: String) {
        scalars = Array(text.unicodeScalars)
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
