import Foundation
import SyncCore

extension ODataExpression {
    /// The canonical OData text of the expression.
    ///
    /// Every operation is parenthesized (`(Count add 200) gt 350` renders as
    /// `((Count add 200) gt 350)`), chains of one logical operator share one pair of parentheses
    /// (`((a eq 1) or (a eq 2) or (a eq 3))`), function arguments are separated by `,` alone, and
    /// dates are written with three fraction digits and `Z`. A double that is not finite renders as
    /// `null`.
    public var odataText: String { odataText(dialect: .v2) }

    /// The canonical OData text of the expression in `dialect`: as ``odataText``, but under
    /// ``ODataDialect/v3`` every date is `cast(2024-01-31T12:00:00.000Z,Edm.DateTimeOffset)` (unquoted, as the
    /// Datasync client writes it) and a guid a string.
    public func odataText(dialect: ODataDialect) -> String {
        var output = ""
        render(into: &output, dialect)
        return output
    }

    private func render(into output: inout String, _ dialect: ODataDialect) {
        switch self {
        case .literal(let literal):
            output += literal.odataText(dialect: dialect)
        case .member(let path):
            output += path
        case .not(let operand):
            output += "not("
            operand.render(into: &output, dialect)
            output += ")"
        case .negate(let operand):
            output += "-("
            operand.render(into: &output, dialect)
            output += ")"
        case .binary(let op, let left, let right):
            output += "("
            renderChain(op, left, right, into: &output, dialect)
            output += ")"
        case .function(let function, let arguments):
            output += function.rawValue + "("
            for (index, argument) in arguments.enumerated() {
                if index > 0 { output += "," }
                argument.render(into: &output, dialect)
            }
            output += ")"
        }
    }

    /// `a op b`, flattening a left operand that is the same logical operator: `a or b or c`.
    private func renderChain(
        _ op: ODataBinaryOperator, _ left: ODataExpression, _ right: ODataExpression, into output: inout String,
        _ dialect: ODataDialect
    ) {
        if op.isLogical, case .binary(let leftOp, let leftLeft, let leftRight) = left, leftOp == op {
            renderChain(op, leftLeft, leftRight, into: &output, dialect)
        } else {
            left.render(into: &output, dialect)
        }
        output += " \(op.rawValue) "
        right.render(into: &output, dialect)
    }
}

extension ODataLiteral {
    /// The literal as OData text: `'it''s'`, `42`, `1.5`, `true`, `null`, `datetime'…Z'`, `guid'…'`.
    public var odataText: String {
        switch self {
        case .null: "null"
        case .bool(let bool): bool ? "true" : "false"
        case .int(let int): String(int)
        case .double(let double): double.isFinite ? double.description : "null"
        case .string(let string): "'" + string.replacingAll("'", with: "''") + "'"
        case .date(let date, .datetime): "datetime'\(date)'"
        case .date(let date, .datetimeoffset): "datetimeoffset'\(date)'"
        case .date(let date, .cast): "cast('\(date)',Edm.DateTimeOffset)"
        case .guid(let guid): "guid'\(guid)'"
        }
    }

    /// The literal as OData text in `dialect` (see ``ODataExpression/odataText(dialect:)``).
    public func odataText(dialect: ODataDialect) -> String {
        switch (self, dialect) {
        case (.date(let date, _), .v3): "cast(\(date),Edm.DateTimeOffset)"
        case (.guid(let guid), .v3): "'\(guid)'"
        default: odataText
        }
    }
}

extension ODataExpression: CustomStringConvertible {
    /// The canonical OData text (see ``odataText``).
    public var description: String { odataText }
}
