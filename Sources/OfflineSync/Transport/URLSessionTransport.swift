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
            case .timedOut: throw TransportError(.timedOut, host: host)
            case .cancelled: throw TransportError(.cancelled, host: host)
            case .networkConnectionLost: throw TransportError(.connectionLost, host: host)
            default: throw TransportError(.unreachable, host: host)
            }
        } catch is CancellationError {
            throw TransportError(.cancelled, host: host)
        }
    }

    /// `URLSession.data(for:)`, with the session task cancelled away from the thread that cancels the
    /// Swift task. FoundationNetworking's own version deadlocks when a task is cancelled just as its
    /// reply completes (swift-corelibs-foundation #5412): the cancelling thread holds the Swift task's
    /// lock while it waits for the session's queue, and that queue waits for the lock to resume the
    /// task. Cancelling the Swift task cancels the request, which then throws `URLError(.cancelled)`.
    private func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        // The session task once made, and whether cancellation came first.
        let state = Locked<(task: URLSessionDataTask?, isCancelled: Bool)>((nil, false))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                let isCancelled = state.withLock { state in
                    state.task = task
                    return state.isCancelled
                }
                task.resume()
                if isCancelled { task.cancel() }
            }
        } onCancel: {
            let task = state.withLock { state in
                state.isCancelled = true
                return state.task
            }
            // Not here: this handler runs under the Swift task's lock.
            if let task { DispatchQueue.global().async { task.cancel() } }
        }
    }
}
