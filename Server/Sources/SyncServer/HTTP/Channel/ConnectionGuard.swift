import Metrics
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a connection was refused: the metric's `reason` and the answer.
enum Refusal: String, CaseIterable {
    case tooManyConnections = "too_many_connections"
    case headTimeout = "head_timeout"
    case bodyTimeout = "body_timeout"
    case uriTooLong = "uri_too_long"
    case headersTooLarge = "headers_too_large"
    case malformedRequest = "malformed_request"
    /// Not an answer: a response the client did not read within ``ConnectionLimits/responseTimeout`` ends its
    /// connection unfinished.
    case responseTimeout = "response_timeout"

    func response(_ limits: ConnectionLimits) -> (status: HTTPResponseStatus, message: String) {
        switch self {
        case .tooManyConnections:
            (
                .serviceUnavailable,
                "The server has too many open connections (at most \(limits.maxConnections)); try again"
            )
        case .headTimeout:
            (.requestTimeout, "The request's head did not arrive within \(limits.headTimeout)")
        case .bodyTimeout:
            (.requestTimeout, "The request's body did not arrive within \(limits.bodyTimeout)")
        case .uriTooLong:
            (.uriTooLong, "The request line is longer than \(limits.maxRequestLineLength) bytes")
        case .headersTooLarge:
            (.requestHeaderFieldsTooLarge, "The request's headers are larger than \(limits.maxHeaderSize) bytes")
        case .malformedRequest:
            (.badRequest, "The request is not valid HTTP/1.1")
        case .responseTimeout:
            (.requestTimeout, "The response was not read within \(limits.responseTimeout)")
        }
    }
}

/// The state one connection's two guards share (both run on the connection's event loop): where the
/// current request is, and the one deadline that applies to that phase.
final class ConnectionGuard {
    enum Phase {
        /// Between requests: no byte of the next one yet.
        case idle
        /// Bytes of a request's head are arriving; counts of its request line and of the whole head,
        /// and how much of the blank line that ends it has been seen.
        case head(lineBytes: Int, headBytes: Int, lineEnded: Bool, terminator: Int)
        /// The head is complete; the parser is delivering it and its body.
        case body
        /// The request is complete; the server is answering (the store bounds that time).
        case responding
        /// Refused or closing: nothing more is read.
        case closed
    }

    let limits: ConnectionLimits
    let connections: ConnectionCounter
    let refusals: [Refusal: Counter]
    var phase = Phase.idle
    var deadline: Scheduled<Void>?
    /// The deadline of the response being sent, from its head until its end is written to the socket.
    var sendDeadline: Scheduled<Void>?
    /// The front of the pipeline, where a refusal is written as bytes (below the HTTP encoder).
    var rawContext: ChannelHandlerContext?
    var counted = false
    /// Whether the current request has been answered in full (possibly before its body was read).
    var answered = false

    init(limits: ConnectionLimits, connections: ConnectionCounter, refusals: [Refusal: Counter]) {
        self.limits = limits
        self.connections = connections
        self.refusals = refusals
    }

    /// Enters `phase` and arms its deadline (none while answering).
    func enter(_ phase: Phase) {
        self.phase = phase
        deadline?.cancel()
        deadline = nil
        guard let context = rawContext else { return }
        let (limit, refusal): (Duration, Refusal?)
        switch phase {
        case .idle: (limit, refusal) = (limits.idleTimeout, nil)
        case .head: (limit, refusal) = (limits.headTimeout, .headTimeout)
        case .body: (limit, refusal) = (limits.bodyTimeout, .bodyTimeout)
        case .responding, .closed: return
        }
        deadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .init(limit)) { [self] in
            // A request answered before its body arrived (a 413, a 501) just ends when the rest never comes.
            if let refusal, !answered { refuse(refusal) } else { close() }
        }
    }

    /// Arms the deadline of a response whose head is being written: the client must take all of it in time.
    func startSending() {
        sendDeadline?.cancel()
        guard let context = rawContext else { return }
        sendDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(
            in: .init(limits.responseTimeout)
        ) { [self] in
            refusals[.responseTimeout]?.increment()
            // A reset, not a close: the kernel would otherwise go on sending what it holds of the response (megabytes
            // on loopback) to a client that reads slowly, and hold it until then.
            guard let socket = context.channel as? any SocketOptionProvider else { return close() }
            socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolatedUnsafeUnchecked().whenComplete { _ in
                self.close()
            }
        }
    }

    /// Stops the response's deadline: its last byte has reached the socket (or the connection is gone).
    func stopSending() {
        sendDeadline?.cancel()
        sendDeadline = nil
    }

    /// Answers `refusal` with its status and JSON body, then closes the connection.
    func refuse(_ refusal: Refusal) {
        guard let context = rawContext else { return }
        if case .closed = phase { return }
        refusals[refusal]?.increment()
        let (status, message) = refusal.response(limits)
        let body = JSONValue.object(["error": .string(message)]).serializedData()
        var head =
            "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\nContent-Type: application/json; charset=utf-8\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n"
        if refusal == .tooManyConnections { head += "Retry-After: 1\r\n" }
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + 2 + body.count)
        buffer.writeString(head + "\r\n")
        buffer.writeBytes(body)
        close(after: context.writeAndFlush(NIOAny(buffer)))
    }

    /// Closes the connection (after `written`, when given) and stops every deadline.
    ///
    /// After an answer the close is lingering, as RFC 9112 §9.6 advises: the server stops writing and
    /// drops what still arrives for up to 2 s, so that a client still sending (a long URL, a body) reads
    /// the answer instead of a connection reset.
    func close(after written: EventLoopFuture<Void>? = nil) {
        phase = .closed
        deadline?.cancel()
        deadline = nil
        stopSending()
        guard let context = rawContext else { return }
        guard let written else { return context.close(promise: nil) }
        written.whenComplete { _ in
            context.close(mode: .output, promise: nil)
            context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .seconds(2)) {
                context.close(promise: nil)
            }
        }
    }
}
