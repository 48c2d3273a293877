public import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
public import OfflineSync

/// A transport on AsyncHTTPClient (SwiftNIO), for servers and Linux apps that already use NIO. Apple
/// apps keep `URLSessionTransport`, which needs no NIO.
///
/// For example:
/// ```swift
/// var configuration = SyncClient.Configuration()
/// configuration.transport = AsyncHTTPClientTransport()
/// ```
///
/// Responses come compressed when the server offers it: the default client asks for gzip or deflate and
/// decompresses. A client of your own does so when its configuration enables `decompression`.
public struct AsyncHTTPClientTransport: HTTPTransport {
    private let client: HTTPClient
    /// The largest response body accepted.
    public var maxBodySize: Int

    /// Creates a transport.
    ///
    /// - Parameters:
    ///   - client: The client to send with; ``sharedClient`` by default.
    ///   - maxBodySize: The largest response body accepted, after decompression; 64 MiB by default.
    public init(client: HTTPClient = Self.sharedClient, maxBodySize: Int = 64 << 20) {
        self.client = client
        self.maxBodySize = maxBodySize
    }

    /// The client transports use by default: `HTTPClient.shared`'s settings, but with no limit on how far a
    /// response may decompress (the shared client stops at 25 times its compressed size, and a page of rows
    /// with repeated text compresses further); `maxBodySize` bounds the result instead. Never shut down.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.decompression = .enabled(limit: .none)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        let host = request.url.host.map { host in request.url.port.map { "\(host):\($0)" } ?? host } ?? "server"
        let timeout = request.timeout.components
        let nanoseconds = timeout.seconds * 1_000_000_000 + timeout.attoseconds / 1_000_000_000
        do {
            let response = try await client.execute(outgoing, timeout: .nanoseconds(nanoseconds))
            let body = try await response.body.collect(upTo: maxBodySize)
            // A repeated field (`Link`, `Vary`) is kept whole, its values joined as RFC 9110 §5.3 allows and as
            // URLSession does.
            var headers: [String: String] = [:]
            for field in response.headers {
                headers[field.name] = headers[field.name].map { $0 + ", " + field.value } ?? field.value
            }
            return HTTPResponseData(
                status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
        } catch let error as CancellationError {
            throw TransportError(.cancelled, host: host, underlying: error)
        } catch let error as HTTPClientError
            where error == .deadlineExceeded || error == .readTimeout
            || error == .connectTimeout
        {
            throw TransportError(.timedOut, host: host, underlying: error)
        } catch let error as HTTPClientError where error == .cancelled {
            throw TransportError(.cancelled, host: host, underlying: error)
        } catch let error as HTTPClientError where error == .remoteConnectionClosed {
            throw TransportError(.connectionLost, host: host, underlying: error)
        } catch {
            throw TransportError(.unreachable, host: host, underlying: error)
        }
    }
}
