import HTTPTypes
import Hummingbird
import NIOCore
import SyncCore

extension APIError: HTTPResponseError {
    func response(from request: Request, context: some RequestContext) throws -> Response { response }

    /// The answer: the status, the body, the stored item's `ETag` for a conflict, and the error's headers.
    var response: Response {
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
