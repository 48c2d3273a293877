import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import SyncCore

/// Reads a request's JSON body, the one way every route that takes one does: the media type must be
/// `application/json` (parameters allowed) — a web page can make a browser send a `text/plain` body anywhere, not an
/// `application/json` one; past `maxBytes` it is a 413 (a declared length before any byte is read); a body cut short
/// or not JSON is a 400, and so is JSON whose parse would cost more than linear time (``JSONValue/ParsingLimits/clientText``:
/// a member name that is not ASCII or is longer than 255 bytes, a string that is not stream-safe).
enum JSONBody {
    /// The body as JSON.
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - maxBytes: The largest body taken.
    ///   - what: What the body is, for the 413's message ("The request body", "The batch").
    /// - Returns: The value.
    /// - Throws: ``APIError``: 415, 413 or 400.
    static func read(_ request: Request, maxBytes: Int, what: String) async throws -> JSONValue {
        guard isJSON(request) else {
            throw APIError(.unsupportedMediaType, "The body must be JSON: send Content-Type: application/json")
        }
        let buffer = try await bytes(request, maxBytes: maxBytes, what: what)
        do {
            return try buffer.withUnsafeReadableBytes { raw in
                try JSONValue(parsingUTF8: raw.bindMemory(to: UInt8.self), limits: .clientText)
            }
        } catch {
            throw APIError.badRequest("The body is not valid JSON: \(error)")
        }
    }

    /// Whether the request's media type is `application/json` (parameters allowed).
    static func isJSON(_ request: Request) -> Bool {
        let mediaType = request.headers[.contentType]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        return mediaType == "application/json"
    }

    /// The body's bytes, whatever its type: past `maxBytes` a 413, cut short a 400.
    ///
    /// - Throws: ``APIError``: 413 or 400.
    static func bytes(_ request: Request, maxBytes: Int, what: String) async throws -> ByteBuffer {
        let tooLarge = APIError(.contentTooLarge, "\(what) is larger than \(maxBytes) bytes")
        if let length = request.headers[.contentLength], (Int(length) ?? .max) > maxBytes { throw tooLarge }
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBytes)
        } catch is NIOTooManyBytesError {
            throw tooLarge
        } catch let error as HTTPParserError {
            throw APIError.badRequest("The request body is malformed: \(error)")
        }
        return buffer
    }
}

extension JSONBody {
    /// The request body as a JSON object: 415 when not JSON, 413 past `maxBytes`, 400 when it is not an object.
    static func object(_ request: Request, maxBytes: Int) async throws -> [String: JSONValue] {
        let value = try await read(request, maxBytes: maxBytes, what: "The request body")
        guard case .object(let members) = value else { throw APIError.badRequest("The body must be a JSON object") }
        return members
    }
}
