/// A wire value (an item id, a table name, a version, a date, …) that breaks the protocol's rules.
///
/// Its `description` names the kind of value and the rule, never the value itself.
public struct ValueError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of value was refused, such as "item id" or "table name".
    public let kind: String
    /// Which rule it breaks, in a few words.
    public let reason: String

    /// Creates an error for a `kind` of value that breaks a rule.
    ///
    /// - Parameters:
    ///   - kind: What kind of value was refused.
    ///   - reason: Which rule it breaks.
    public init(kind: String, reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// One readable line, such as `Invalid item id: it contains '/'`.
    public var description: String { "Invalid \(kind): \(reason)" }
}
