import Foundation
public import OfflineSync

/// A transport that plays a script of responses and faults, one step per request, optionally in
/// front of a real transport. When the script runs out it forwards (or, with no real transport,
/// answers 503).
///
/// For example, a lost insert response — the server committed, the client saw a timeout:
/// ```swift
/// let transport = ScriptedTransport(forwardingTo: URLSessionTransport(), [.forwardThenFail(.timedOut)])
/// ```
public final class ScriptedTransport: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind `lock`.
    /// One scripted answer.
    public enum Step: Sendable {
        /// Answer with this response without contacting anything.
        case respond(HTTPResponseData)
        /// Answer with a status and a JSON body.
        case status(Int, json: JSONValue?)
        /// Fail without contacting anything.
        case fail(TransportError.Code)
        /// Forward to the real transport.
        case forward
        /// Forward to the real transport (so the server does the work), then fail as if the response was lost.
        case forwardThenFail(TransportError.Code)
    }

    private let lock = NSLock()
    private var steps: [Step]
    private var recorded: [HTTPRequestData] = []
    private let base: (any HTTPTransport)?

    /// Creates a transport that plays `steps` and then forwards to `base`.
    ///
    /// - Parameters:
    ///   - base: The real transport behind the script, if any.
    ///   - steps: The scripted answers, in order.
    public init(forwardingTo base: (any HTTPTransport)? = nil, _ steps: [Step] = []) {
        self.base = base
        self.steps = steps
    }

    /// Adds steps to the end of the script.
    ///
    /// - Parameter more: The steps.
    public func append(_ more: [Step]) {
        lock.withLock { steps += more }
    }

    /// Every request sent so far, in order.
    public var requests: [HTTPRequestData] {
        lock.withLock { recorded }
    }

    public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        let step: Step? = lock.withLock {
            recorded.append(request)
            return steps.isEmpty ? nil : steps.removeFirst()
        }
        let host = request.url.host ?? "server"
        switch step {
        case .respond(let response)?:
            return response
        case .status(let status, let json)?:
            return HTTPResponseData(
                status: status, headers: ["Content-Type": "application/json"], body: json?.serializedData() ?? Data())
        case .fail(let code)?:
            throw TransportError(code, host: host)
        case .forwardThenFail(let code)?:
            if let base { _ = try await base.send(request) }
            throw TransportError(code, host: host)
        case .forward?, nil:
            guard let base else { return HTTPResponseData(status: 503) }
            return try await base.send(request)
        }
    }
}
