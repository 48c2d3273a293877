public import Foundation

// Foundation's `localizedDescription` of an error that is not a `LocalizedError` reads "The operation
// could not be completed. (OfflineSync.LocalWriteError error 1.)": these say the same one line as their
// `description`, with no item contents, tokens or payloads.

extension LocalWriteError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension LocalStoreError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension PushError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension PullError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension ServerUnavailableError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension PurgeError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension ResolutionError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension RemoteTableError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension TransportError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension OperationError: Error, LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension SyncStatusError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension ItemDecodingError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}
