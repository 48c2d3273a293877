import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore
import TestSupport

/// A development token for `subject` from `sync-server token`, signed with `secret`.
func developmentToken(_ subject: String, secret: String, ttl: Int = 600) async throws -> String {
    let result = try await runProduct(
        "sync-server", ["token", "--sub", subject, "--secret", secret, "--ttl", String(ttl)], environment: [:])
    guard result.status == 0 else { throw ProcessError("sync-server token failed: \(result.error)") }
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// JSON requests to a server process on 127.0.0.1, with `ZUMO-API-VERSION: 2.0.0`.
struct E2EHTTP {
    let port: Int

    /// Sends a request; the answer's body is nil when it is empty or not JSON.
    func send(
        _ method: HTTPMethod, _ path: String, body: JSONValue? = nil, headers: [String: String] = [:]
    ) async throws -> (status: UInt, headers: HTTPHeaders, body: JSONValue?) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(Array(body.serializedData()))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 24)
        return (response.status.code, response.headers, try? JSONValue(parsing: String(buffer: bytes)))
    }
}
