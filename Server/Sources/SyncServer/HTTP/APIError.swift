import HTTPTypes
import Hummingbird
import NIOCore
import SyncCore

/// An error the table API answers with: a status and a JSON body, `{"error": "…"}` or, for
/// conflicts, the stored item with its `ETag`.
struct APIError: HTTPResponseError {
    let status: HTTPResponse.Status
    let body: JSONValue
    /// Why, for the `sync_refusals{sync_reason}` metric; nil counts it by its status.
    var reason: String?
    /// More response headers (`Allow` for a 405).
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ message: String, reason: String? = nil) {
        self.status = status
        body = ["error": .string(message)]
        self.reason = reason
    }

    /// A conflict (409 or 412) whose body is the server's copy of the item.
    init(conflict status: HTTPResponse.Status, storedItem: JSONValue) {
        self.status = status
        body = storedItem
    }

    static func badRequest(_ message: String, reason: String? = nil) -> APIError {
        APIError(.badRequest, message, reason: reason)
    }

    /// The metric's reason: the one given, else one named after the status.
    var refusalReason: String {
        if let reason { return reason }
        switch status {
        case .badRequest: return "invalid_request"
        case .notFound: return "not_found"
        case .methodNotAllowed: return "method_not_allowed"
        case .conflict: return "conflict"
        case .preconditionFailed: return "precondition_failed"
        case .contentTooLarge: return "body_too_large"
        case .unsupportedMediaType: return "unsupported_media_type"
        case .notImplemented: return "transfer_coding"
        case .serviceUnavailable: return "unavailable"
        default: return "status_\(status.code)"
        }
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = JSONResponse.make(
            status, body, eTag: status == .conflict || status == .preconditionFailed ? body.version : nil)
        response.headers.append(contentsOf: headers)
        return response
    }
}

/// JSON responses with the protocol's headers.
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ body: JSONValue, eTag: Version? = nil, location: String? = nil)
        -> Response
    {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-cache"]
        if let eTag { headers[.eTag] = eTag.entityTag }
        if let location { headers[.location] = location }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        body.write(to: &bytes)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A response whose body is JSON already written.
    static func make(_ status: HTTPResponse.Status, bytes: [UInt8]) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-cache"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A single item, with its version as the `ETag`.
    static func item(_ status: HTTPResponse.Status, _ item: JSONValue, location: String? = nil) -> Response {
        make(status, item, eTag: item.version, location: location)
    }
}
