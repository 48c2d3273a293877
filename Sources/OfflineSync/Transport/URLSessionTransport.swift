import SyncSQLite

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
            let (data, response) = try await data(for: urlRequest)
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
            case .timedOut: throw TransportError(.timedOut, host: host, underlying: error)
            case .cancelled: throw TransportError(.cancelled, host: host, underlying: error)
            case .networkConnectionLost: throw TransportError(.connectionLost, host: host, underlying: error)
            default: throw TransportError(.unreachable, host: host, underlying: error)
            }
        } catch let error as CancellationError {
            throw TransportError(.cancelled, host: host, underlying: error)
        }
    }

    #if canImport(FoundationNetworking)
        /// `URLSession.data(for:)`, without cancelling the session task: FoundationNetworking cannot
        /// cancel one safely as its reply completes — its own `data(for:)` then deadlocks
        /// (swift-corelibs-foundation #5412), and `URLSessionTask.cancel()` may crash the process
        /// ("a task that is not in the registry"). Cancelling the Swift task throws
        /// `URLError(.cancelled)` at once; the request is left to end by itself (within its timeout)
        /// and its reply is ignored, as if it were lost.
        private func data(for request: URLRequest) async throws -> (Data, URLResponse) {
            // The caller while it waits, and whether it was cancelled before the request started.
            let state = Locked<(waiter: CheckedContinuation<(Data, URLResponse), any Error>?, isCancelled: Bool)>(
                (nil, false))
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let isCancelled = state.withLock { state in
                        if !state.isCancelled { state.waiter = continuation }
                        return state.isCancelled
                    }
                    guard !isCancelled else { return continuation.resume(throwing: URLError(.cancelled)) }
                    session.dataTask(with: request) { data, response, error in
                        guard let waiter = state.withLock({ $0.waiter.take() }) else { return }
                        if let error {
                            waiter.resume(throwing: error)
                        } else if let response {
                            waiter.resume(returning: (data ?? Data(), response))
                        } else {
                            waiter.resume(throwing: URLError(.badServerResponse))
                        }
                    }.resume()
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    state.isCancelled = true
                    return state.waiter.take()
                }
                waiter?.resume(throwing: URLError(.cancelled))
            }
        }
    #else
        private func data(for request: URLRequest) async throws -> (Data, URLResponse) {
            try await session.data(for: request)
        }
    #endif
}
