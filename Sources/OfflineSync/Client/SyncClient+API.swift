public import Foundation
public import SyncCore

extension SyncClient {
    /// Calls a custom API of the backend (`/api/NAME`), online: JSON in and out. The request carries the token
    /// and headers table requests carry (a 401 asks the token provider again, once). Transient failures (no reply,
    /// 5xx, 408, 429) are tried again, as a push's are, for the methods that may be repeated without effect
    /// (`GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS`) only: a `POST` or `PATCH` that met one is not sent twice.
    ///
    /// The Azure Mobile Apps iOS SDK's `invokeAPI(_:body:HTTPMethod:parameters:headers:completion:)` maps as is:
    /// ```swift
    /// let result = try await client.invokeAPI("runtimeInfo", method: "GET")
    /// let total = try await client.invokeAPI("sum", body: ["a": 1, "b": 2], parameters: ["round": "true"])
    /// ```
    /// - Parameters:
    ///   - name: The API's name: letters, digits, `_` and `-`.
    ///   - method: The HTTP method; `POST` by default (a string literal such as `"GET"` is one).
    ///   - body: The JSON body, or nil for none.
    ///   - parameters: Query parameters (percent-encoded here).
    ///   - headers: More header fields (a dictionary literal is one); the protocol's own (version, token, installation, content type, `Accept`,
    ///     `User-Agent`) cannot be replaced, whatever their case.
    /// - Returns: The answer's JSON, or nil when it has no body.
    /// - Throws: ``APICallError`` for an answer that is not a success (with the server's message), or a success
    ///   whose body is not JSON; ``ServerUnavailableError`` when no try got an answer that is not transient;
    ///   ``TransportError`` when a non-repeatable call got no answer (the server may have done the work);
    ///   ``AccountError`` (nothing sent); `ValueError` for a bad name or method (nothing sent). Cancelling the task
    ///   stops waiting (`CancellationError`); the server may still do the work.
    @discardableResult
    public func invokeAPI(
        _ name: String, method: APIMethod = .post, body: JSONValue? = nil, parameters: [String: String] = [:],
        headers: APIHeaders = [:]
    ) async throws -> JSONValue? {
        let response = try await callAPI(name, method: method, body: body, parameters: parameters, headers: headers)
        guard !response.body.isEmpty else { return nil }
        do {
            return try JSONValue(parsing: response.body)
        } catch {
            throw APICallError(name: name, status: response.status, message: "the answer is not JSON: \(error)")
        }
    }

    /// Calls a custom API with a typed body and answer (see ``invokeAPI(_:method:body:parameters:headers:)``).
    ///
    /// - Parameters:
    ///   - name: The API's name.
    ///   - method: The HTTP method; `POST` by default.
    ///   - body: The body, encoded as an item is (dates as wire dates).
    ///   - parameters: Query parameters.
    ///   - headers: More header fields.
    ///   - type: The answer's type (an optional one takes an empty answer as nil).
    /// - Returns: The answer, decoded.
    /// - Throws: As ``invokeAPI(_:method:body:parameters:headers:)``; `EncodingError` for a body that does not encode
    ///   (nothing sent); ``APICallError`` when the answer does not decode as `type`.
    public func invokeAPI<Body: Encodable & Sendable, Answer: Decodable>(
        _ name: String, method: APIMethod = .post, body: Body, parameters: [String: String] = [:],
        headers: APIHeaders = [:], as type: Answer.Type
    ) async throws -> Answer {
        let json = try ItemCoder.json(body)
        let answer = try await invokeAPI(name, method: method, body: json, parameters: parameters, headers: headers)
        return try Self.decode(answer, as: type, from: name)
    }

    /// Calls a custom API without a body and decodes its answer (see ``invokeAPI(_:method:body:parameters:headers:)``).
    ///
    /// - Parameters:
    ///   - name: The API's name.
    ///   - method: The HTTP method; `GET` by default.
    ///   - parameters: Query parameters.
    ///   - headers: More header fields.
    ///   - type: The answer's type.
    /// - Returns: The answer, decoded.
    /// - Throws: As ``invokeAPI(_:method:body:parameters:headers:)``; ``APICallError`` when the answer does not
    ///   decode as `type`.
    public func invokeAPI<Answer: Decodable>(
        _ name: String, method: APIMethod = .get, parameters: [String: String] = [:], headers: APIHeaders = [:],
        as type: Answer.Type
    ) async throws -> Answer {
        let answer = try await invokeAPI(name, method: method, body: nil, parameters: parameters, headers: headers)
        return try Self.decode(answer, as: type, from: name)
    }

    private static func decode<Answer: Decodable>(_ answer: JSONValue?, as type: Answer.Type, from name: String)
        throws -> Answer
    {
        do {
            return try ItemCoder.item(answer ?? .null, as: type)
        } catch {
            throw APICallError(name: name, status: 200, message: "the answer is not a \(type): \(error)")
        }
    }

    private func callAPI(
        _ name: String, method: APIMethod, body: JSONValue?, parameters: [String: String], headers: APIHeaders
    ) async throws -> HTTPResponseData {
        guard (1...128).contains(name.count),
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
        else {
            throw ValueError(kind: "API name", reason: "'\(name.prefix(40))' is not 1–128 letters, digits, _ and -")
        }
        let verb = method.description
        guard !verb.isEmpty, verb.allSatisfy({ $0.isASCII && $0.isLetter }) else {
            throw ValueError(kind: "HTTP method", reason: "'\(verb.prefix(20))' is not a method")
        }
        let headers = headers.dictionary
        let url = endpoint.apiURL(name, parameters: parameters)
        let endpoint = self.endpoint
        let send = {
            try await endpoint.send(
                verb, url, body: body, features: body == nil ? ["AG"] : ["AJ"], extraHeaders: headers)
        }
        let response: HTTPResponseData
        if method.isRepeatable {
            // The last answer, for the error when the tries end on a transient status.
            var last: HTTPResponseData?
            do {
                response = try await context.parts.sendRetrying(logger: configuration.logger) {
                    let answer = try await send()
                    last = answer
                    return answer
                }
            } catch SyncStop.unavailable(let error) {
                if let last, case .status = error.reason { throw APICallError(name: name, last) }
                throw error
            } catch SyncStop.unauthorized {
                throw APICallError(name: name, last ?? HTTPResponseData(status: 401))
            } catch SyncStop.cancelled {
                throw CancellationError()
            }
        } else {
            do {
                response = try await send()
            } catch let error as TransportError where error.code == .cancelled {
                throw CancellationError()
            }
        }
        guard (200..<300).contains(response.status) else { throw APICallError(name: name, response) }
        return response
    }
}

/// A custom API answered with an error status, or with a body that is not what was asked for.
public struct APICallError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// The API's name.
    public var name: String
    /// The HTTP status.
    public var status: Int
    /// The server's message (the `error` of its JSON body, or its text), or what was wrong with a success's body.
    public var message: String?
    /// The answer's JSON body, if it had one.
    public var body: JSONValue?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - name: The API's name.
    ///   - status: The HTTP status.
    ///   - message: The server's message.
    ///   - body: The answer's JSON body.
    public init(name: String, status: Int, message: String?, body: JSONValue? = nil) {
        self.name = name
        self.status = status
        self.message = message
        self.body = body
    }

    init(name: String, _ response: HTTPResponseData) {
        self.init(name: name, status: response.status, message: response.message, body: response.json)
    }

    /// One line, such as `API sum answered 400: 'a' must be a number`.
    public var description: String { "API \(name) answered \(status): \(message ?? "no message")" }

    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}
