import HTTPTypes
import SyncCore

extension TableStoreError {
    /// The error in the API's words: a precondition failure answers `conflictStatus` (412 when the precondition came
    /// from `If-Match`, 409 from a v2 body `version`), and a conflict's body is the stored item as `shown` shows it
    /// (the dialect's ``TableWire/shown(_:)``).
    func apiError(conflictStatus: HTTPResponse.Status, shown: (JSONValue) -> JSONValue) -> APIError {
        switch self {
        case .unknownTable, .notFound: APIError(.notFound, description)
        case .alreadyExists(let stored): APIError(conflict: .conflict, storedItem: shown(stored))
        case .idTaken: APIError(.conflict, description)
        case .preconditionFailed(let stored): APIError(conflict: conflictStatus, storedItem: shown(stored))
        case .invalidItem, .invalidQuery: APIError.badRequest(description)
        case .unavailable: APIError(.serviceUnavailable, description)
        case .forbidden: APIError(.forbidden, description, reason: RefusalReason.forbidden)
        }
    }

    /// Whether the error is a write that met another's (a conflict, counted as such).
    var isConflict: Bool {
        switch self {
        case .alreadyExists, .idTaken, .preconditionFailed: true
        default: false
        }
    }
}

/// Runs a store call, its errors as API errors (``TableStoreError/apiError(conflictStatus:shown:)``); `onConflict`
/// hears each conflict first.
func mappingStoreErrors<T>(
    conflictStatus: HTTPResponse.Status = .preconditionFailed, shown: (JSONValue) -> JSONValue = { $0 },
    onConflict: () -> Void = {}, _ body: () async throws -> T
) async throws -> T {
    do {
        return try await body()
    } catch let error as TableStoreError {
        if error.isConflict { onConflict() }
        throw error.apiError(conflictStatus: conflictStatus, shown: shown)
    }
}
