#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

/// The default transport, on `URLSession` (FoundationNetworking on Linux): no dependency beyond
/// Foundation, so Apple apps carry no networking library of ours.
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// Creates a transport.
    ///
    /// - Parameter session: The session to use; an ephemeral one by default.
    public init(session: URLSession = URLSession(configuration: .ephemeral)) {
        self.session = session
    }

    public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.timeoutInterval =
            Double(request.timeout.components.seconds)
            + Double(request.timeout.components.attoseconds) / 1e18
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        let host = request.url.host.map { host in request.url.port.map { "\(host):\($0)" } ?? host } ?? "server"
        do {
            let (data, response) = try await session.data(for: urlRequest)
            guard let http = response as? HTTPURLResponse else { throw TransportError(.unreachable, host: host) }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return HTTPResponseData(status: http.statusCode, headers: headers, body: data)
        } catch let error as TransportError {
            throw error
        } catch let error as URLError {
            switch error.code {
            case .timedOut: throw TransportError(.timedOut, host: host)
            case .cancelled: throw TransportError(.cancelled, host: host)
            case .networkConnectionLost: throw TransportError(.connectionLost, host: host)
            default: throw TransportError(.unreachable, host: host)
            }
        } catch is CancellationError {
            throw TransportError(.cancelled, host: host)
        }
    }
}
