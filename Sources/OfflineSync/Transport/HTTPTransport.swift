public import Foundation

/// Sends HTTP requests for the client. `URLSessionTransport` is the default; tests and apps with
/// their own networking stack provide another.
public protocol HTTPTransport: Sendable {
    /// Sends one request and returns the response, whatever its status.
    ///
    /// - Parameter request: The request.
    /// - Returns: The response.
    /// - Throws: ``TransportError`` when no response arrived (unreachable, timeout, cancelled).
    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData
}

/// An HTTP request, independent of any networking library.
public struct HTTPRequestData: Sendable, Hashable {
    /// `GET`, `POST`, `PATCH` or `DELETE`.
    public var method: String
    /// The absolute URL.
    public var url: URL
    /// The header fields.
    public var headers: [String: String]
    /// The body, if any.
    public var body: Data?
    /// How long to wait for the response.
    public var timeout: Duration

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - url: The absolute URL.
    ///   - headers: The header fields.
    ///   - body: The body.
    ///   - timeout: How long to wait; 30 seconds by default.
    public init(
        method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: Duration = .seconds(30)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// An HTTP response.
public struct HTTPResponseData: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The header fields; look them up with ``header(_:)`` (names are case-insensitive).
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// Creates a response.
    ///
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: The header fields.
    ///   - body: The body.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A header's value, by case-insensitive name.
    ///
    /// - Parameter name: The header's name.
    /// - Returns: Its value, or nil.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.key.lowercased() == lowered }?.value
    }
}

/// No complete response arrived.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why.
    public enum Code: String, Sendable, Hashable {
        /// The server could not be reached (no network, refused, DNS).
        case unreachable
        /// The response did not arrive in time; the server may or may not have done the work.
        case timedOut
        /// The connection was lost before the reply was complete; the server may or may not have
        /// done the work.
        case connectionLost
        /// The caller cancelled.
        case cancelled
    }

    /// Why no response arrived.
    public var code: Code
    /// The URL's host and port, for the message.
    public var host: String
    /// What the networking library threw (a `URLError`, an AsyncHTTPClient error), for logs and diagnosis; not
    /// part of equality.
    public var underlying: (any Error)?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: Why.
    ///   - host: The server's host and port.
    ///   - underlying: What the networking library threw, if anything.
    public init(_ code: Code, host: String, underlying: (any Error)? = nil) {
        self.code = code
        self.host = host
        self.underlying = underlying
    }

    /// Equal when the code and the host are.
    public static func == (lhs: TransportError, rhs: TransportError) -> Bool {
        lhs.code == rhs.code && lhs.host == rhs.host
    }

    /// Hashes the code and the host.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(host)
    }

    /// One line, such as `Server unreachable at 127.0.0.1:8080`.
    public var description: String {
        switch code {
        case .unreachable: "Server unreachable at \(host)"
        case .timedOut: "No answer in time from \(host)"
        case .connectionLost: "Connection to \(host) lost before the reply was complete"
        case .cancelled: "Request to \(host) cancelled"
        }
    }
}
