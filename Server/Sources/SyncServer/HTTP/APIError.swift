import HTTPTypes
import SyncCore

/// An error the table API answers with: a status and a JSON body, `{"error": "…"}` or, for
/// conflicts, the stored item with its `ETag`. The table service throws it; the routes answer it
/// (``response(from:context:)``, in `APIError+Response.swift`).
struct APIError: Error, Sendable {
    let status: HTTPResponse.Status
    let body: JSONValue
    /// Why, for the `sync_refusals{sync_reason}` metric; nil counts it by its status.
    var reason: RefusalReason?
    /// More response headers (`Allow` for a 405).
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ message: String, reason: RefusalReason? = nil) {
        self.status = status
        body = ["error": .string(message)]
        self.reason = reason
    }

    /// A conflict (409 or 412) whose body is the server's copy of the item.
    init(conflict status: HTTPResponse.Status, storedItem: JSONValue) {
        self.status = status
        body = storedItem
    }

    static func badRequest(_ message: String, reason: RefusalReason? = nil) -> APIError {
        APIError(.badRequest, message, reason: reason)
    }

    /// The metric's reason: the one given, else one named after the status.
    var refusalReason: String {
        if let reason { return reason.rawValue }
        let byStatus: RefusalReason? =
            switch status {
            case .badRequest: .invalidRequest
            case .notFound: .notFound
            case .methodNotAllowed: .methodNotAllowed
            case .conflict: .conflict
            case .preconditionFailed: .preconditionFailed
            case .contentTooLarge: .bodyTooLarge
            case .unsupportedMediaType: .unsupportedMediaType
            case .notImplemented: .transferCoding
            case .serviceUnavailable: .unavailable
            default: nil
            }
        return byStatus?.rawValue ?? "status_\(status.code)"
    }
}
