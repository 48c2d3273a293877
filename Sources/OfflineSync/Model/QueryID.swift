/// Names an incremental pull: the client keeps one cursor per (table, query id), so that pulling
/// again with the same id fetches only what changed since.
///
/// For example:
/// ```swift
/// try await todoItems.pull(queryID: "allTodoItems")
/// ```
public struct QueryID: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The id's text: 1–255 characters, without `|`.
    public let rawValue: String

    /// Creates a query id, or nil when it is empty, longer than 255 characters, or contains `|`.
    ///
    /// - Parameter rawValue: The id's text.
    public init?(rawValue: String) {
        guard (1...255).contains(rawValue.count), !rawValue.contains("|") else { return nil }
        self.rawValue = rawValue
    }

    /// Creates a query id from a literal.
    ///
    /// - Precondition: The literal is 1–255 characters without `|` (a literal is the programmer's own text).
    public init(stringLiteral value: String) {
        precondition(QueryID(rawValue: value) != nil, "A query id is 1–255 characters without '|'")
        rawValue = value
    }

    /// The id's text.
    public var description: String { rawValue }
}
