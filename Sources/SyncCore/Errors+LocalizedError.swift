public import Foundation

// Foundation's `localizedDescription` of an error that is not a `LocalizedError` reads "The operation
// could not be completed. (… error 1.)": these say the same one line as their `description`.

extension ValueError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension ODataError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension JSONParseError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}
