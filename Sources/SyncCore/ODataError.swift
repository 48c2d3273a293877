/// Why an OData query or filter was refused: what went wrong and where.
///
/// `description` reads like `unexpected token 'eq' at position 14`, or for a whole query string
/// `$filter: unexpected token 'eq' at position 14`. Positions count characters from 0.
public struct ODataError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, such as `unexpected token 'eq'`.
    public let message: String
    /// Where, as a 0-based character offset into the option's value; nil when it concerns the whole value.
    public let position: Int?
    /// The query option the error is about, such as `$filter`; nil for a bare filter.
    public let option: String?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - message: What went wrong.
    ///   - position: The 0-based character offset, if any.
    ///   - option: The query option concerned, if any.
    public init(_ message: String, position: Int? = nil, option: String? = nil) {
        self.message = message
        self.position = position
        self.option = option
    }

    /// One readable line.
    public var description: String {
        var text = option.map { "\($0): " } ?? ""
        text += message
        if let position { text += " at position \(position)" }
        return text
    }

    package func `in`(option: String) -> ODataError {
        ODataError(message, position: position, option: option)
    }
}
