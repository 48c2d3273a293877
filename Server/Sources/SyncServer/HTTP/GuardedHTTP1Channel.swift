import HTTPTypes
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle
import SyncSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Hummingbird's HTTP/1.1 channel with the limits a server on a hostile network needs
/// (``ConnectionLimits``): a cap on open connections, deadlines for a request's head and body and
/// for an idle connection, and bounded request lines and headers. Each refusal is an HTTP answer
/// with the usual JSON error body, counted in `sync_refusals{sync_reason}`, and ends the connection.
/// A response not read within its deadline ends the connection unfinished. It also compresses responses
/// (``ResponseCompression``), and bounds a graceful shutdown (``SyncServerConfiguration/shutdownTimeout``).
struct GuardedHTTP1Channel: HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: Responder
    let limits: ConnectionLimits
    let compressionMinimumSize: Int?
    let connections = ConnectionCounter()
    /// When connections still open in a graceful shutdown are closed.
    let shutdown: ShutdownDeadline
    /// Made once, with the metrics factory of the task that builds the server.
    let refusals = Dictionary(
        uniqueKeysWithValues: Refusal.allCases.map {
            ($0, Counter(label: MetricLabel.refusals, dimensions: [(MetricLabel.reason, $0.rawValue)]))
        })

    init(
        responder: @escaping Responder, limits: ConnectionLimits, compressionMinimumSize: Int?,
        shutdownTimeout: Duration
    ) {
        self.responder = responder
        self.limits = limits
        self.compressionMinimumSize = compressionMinimumSize
        self.shutdown = ShutdownDeadline(after: shutdownTimeout)
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let guardState = ConnectionGuard(limits: limits, connections: connections, refusals: refusals)
            // Our limits come first: the parser's own are a little wider, so a request past ours gets our answer.
            var decoderLimits = NIOHTTPDecoderLimitConfiguration()
            decoderLimits.maxHeaderFieldSize = limits.maxHeaderSize + limits.maxRequestLineLength + 1024
            decoderLimits.maxHeaderListSize = limits.maxHeaderSize + limits.maxRequestLineLength + 1024
            try channel.pipeline.syncOperations.addHandler(RawRequestGuard(guardState))
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
            try channel.pipeline.syncOperations.addHandler(ContinueHandler())
            if let minimumSize = compressionMinimumSize {
                try channel.pipeline.syncOperations.addHandlers(ResponseCompression.handlers(from: minimumSize))
            }
            try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try channel.pipeline.syncOperations.addHandler(RequestPartGuard(guardState))
            try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(logger: logger))
            return try NIOAsyncChannel(
                wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    /// Serves the connection's requests. In a graceful shutdown, Hummingbird closes the connection once its request
    /// in flight is answered; one still open at the shutdown's deadline (a request that does not end, a client
    /// that does not read) is closed then, and its request's work ends with an error.
    func handle(value asyncChannel: Value, logger: Logger) async {
        let channel = asyncChannel.channel
        await withGracefulShutdownHandler {
            await handleHTTP(asyncChannel: asyncChannel, logger: logger)
        } onGracefulShutdown: { [shutdown] in
            channel.eventLoop.scheduleTask(deadline: shutdown.deadline()) {
                guard channel.isActive else { return }
                logger.notice("Closing a connection still open at the shutdown deadline")
                // Through the guard, which closes below the handler that holds a close while a response is sent.
                guard let guardHandler = try? channel.pipeline.syncOperations.handler(type: RawRequestGuard.self) else {
                    return channel.close(promise: nil)
                }
                guardHandler.state.close()
            }
        }
    }
}

/// The moment a graceful shutdown closes what is still open: its timeout after the first connection learns of it.
final class ShutdownDeadline: Sendable {
    private let timeout: Duration
    private let moment = Locked<NIODeadline?>(nil)

    init(after timeout: Duration) { self.timeout = timeout }

    /// The deadline, fixed by the first call.
    func deadline() -> NIODeadline {
        moment.withLock { moment in
            if let moment { return moment }
            let deadline = NIODeadline.now() + .init(timeout)
            moment = deadline
            return deadline
        }
    }
}

/// The open connections of one server.
final class ConnectionCounter: Sendable {
    private let count = Locked(0)

    /// Counts a new connection; returns the count with it.
    func opened() -> Int {
        count.withLock {
            $0 += 1; return $0
        }
    }
    func closed() { count.withLock { $0 -= 1 } }
}

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

/// Answers a request head that carries `Expect: 100-continue` with `100 Continue` at once (RFC 9110 §10.1.1: a
/// server sends 100 or a final status before it waits for the body), so that a client such as `curl -T` sends its
/// body without waiting a second first. Only for HTTP/1.1 and later; an HTTP/1.0 client's expectation is ignored.
final class ContinueHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data), head.version.major == 1, head.version.minor >= 1,
            head.headers["Expect"].contains(where: { $0.lowercased() == "100-continue" })
        {
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        context.fireChannelRead(data)
    }
}

/// The first handler of the pipeline: counts the connection, and reads the raw bytes of each
/// request's head to bound its request line, its size and its time.
final class RawRequestGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let state: ConnectionGuard

    init(_ state: ConnectionGuard) { self.state = state }

    func handlerAdded(context: ChannelHandlerContext) {
        state.rawContext = context
        if context.channel.isActive { opened() }
    }

    func channelActive(context: ChannelHandlerContext) {
        opened()
        context.fireChannelActive()
    }

    private func opened() {
        guard !state.counted else { return }
        state.counted = true
        if state.connections.opened() > state.limits.maxConnections {
            state.refuse(.tooManyConnections)
        } else {
            state.enter(.idle)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if state.counted {
            state.counted = false
            state.connections.closed()
        }
        state.deadline?.cancel()
        state.stopSending()
        state.phase = .closed
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        switch state.phase {
        case .closed:
            return  // refused: nothing more reaches the parser
        case .idle:
            state.enter(.head(lineBytes: 0, headBytes: 0, lineEnded: false, terminator: 0))
            fallthrough
        case .head:
            guard scan(bytes) else { return }
        case .body, .responding:
            break
        }
        context.fireChannelRead(data)
    }

    /// Follows the head through `bytes`; false when the request was refused.
    private func scan(_ bytes: ByteBuffer) -> Bool {
        guard case .head(var lineBytes, var headBytes, var lineEnded, var terminator) = state.phase else { return true }
        let limits = state.limits
        for byte in bytes.readableBytesView {
            headBytes += 1
            if !lineEnded {
                lineBytes += 1
                if byte == UInt8(ascii: "\n") { lineEnded = true }
            }
            // The head ends with an empty line: "\r\n\r\n" (or a bare "\n\n", which the parser also takes).
            switch (byte, terminator) {
            case (UInt8(ascii: "\r"), 0), (UInt8(ascii: "\r"), 2): terminator += 1
            case (UInt8(ascii: "\n"), 1), (UInt8(ascii: "\n"), 3): terminator += 1
            case (UInt8(ascii: "\n"), 0): terminator = 2
            case (UInt8(ascii: "\r"), _): terminator = 1
            default: terminator = 0
            }
            if !lineEnded, lineBytes > limits.maxRequestLineLength {
                state.refuse(.uriTooLong)
                return false
            }
            if lineEnded, headBytes - lineBytes > limits.maxHeaderSize {
                state.refuse(.headersTooLarge)
                return false
            }
            if terminator == 4 {
                // The rest (a body, a pipelined request) is the parser's; the next phases come from it.
                state.enter(.body)
                return true
            }
        }
        state.phase = .head(lineBytes: lineBytes, headBytes: headBytes, lineEnded: lineEnded, terminator: terminator)
        return true
    }
}

/// The handler after the HTTP codec: follows requests and responses to move the shared deadline,
/// and answers a request the parser rejects before its head with a JSON error.
final class RequestPartGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let state: ConnectionGuard
    /// Requests whose head has arrived, requests whose end has arrived, and answers whose end has been written, on
    /// this connection. The answer being ended answers request `responsesEnded + 1`; a client may have sent the next
    /// request's head already (it had every byte of the answer, or it pipelines).
    var requestsStarted = 0
    var requestsEnded = 0
    var responsesEnded = 0
    /// Whether a request's head has arrived and its end not yet.
    var readingRequest: Bool { requestsStarted > requestsEnded }
    /// Whether the parser failed inside the current request's body: its answer is the connection's last.
    var failedInBody = false
    /// A close asked for while a response was still being sent, done once its last byte has reached the socket.
    var deferredClose: (mode: CloseMode, promise: EventLoopPromise<Void>?)?

    init(_ state: ConnectionGuard) { self.state = state }

    /// Closes once the response being sent has reached the socket. NIO drops the writes still pending when a channel
    /// closes, and in a graceful shutdown Hummingbird closes a connection as soon as its response's end is written:
    /// a large answer still on its way to its client lost its rest. The guards' own closes (refusals, timeouts, the
    /// shutdown's deadline) start below this handler and are not held.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard state.sendDeadline != nil, mode == .all else { return context.close(mode: mode, promise: promise) }
        if let earlier = deferredClose?.promise, let promise {
            earlier.futureResult.cascade(to: promise)
        } else {
            deferredClose = (mode, deferredClose?.promise ?? promise)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            requestsStarted += 1
            state.answered = false
            if case .head = state.phase { state.enter(.body) }  // a pipelined head the raw guard did not scan
        case .body:
            break
        case .end:
            requestsEnded += 1
            if !state.answered { state.enter(.responding) }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .closed = state.phase {
            // Hummingbird answers a parse error it meets after the answer (while skipping the rest of a body).
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head:
            state.startSending()
            return context.write(data, promise: promise)
        case .body:
            return context.write(data, promise: promise)
        case .end:
            break
        }
        // The response's deadline ends when its last byte has reached the socket.
        let promise = promise ?? context.eventLoop.makePromise()
        promise.futureResult.assumeIsolatedUnsafeUnchecked().whenComplete { _ in
            self.state.stopSending()
            if let (mode, closed) = self.deferredClose {
                self.deferredClose = nil
                context.close(mode: mode, promise: closed)
            }
        }
        // Answered before its own request's body was read (413, 501, a malformed body): the rest is not worth
        // reading. Not so when the request still being read is the next one.
        let answersUnreadRequest = failedInBody || requestsEnded <= responsesEnded
        responsesEnded += 1
        if requestsStarted == responsesEnded { state.answered = true }  // no later request has begun
        if answersUnreadRequest {
            state.answered = true
            let written = context.writeAndFlush(data)
            written.cascade(to: promise)
            state.close(after: written)
            return
        }
        // A request read in full meanwhile waits for its answer (still responding); else the one whose head came early
        // is being read, or none has begun.
        if case .responding = state.phase, requestsEnded <= responsesEnded {
            state.enter(readingRequest ? .body : .idle)
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        if !readingRequest {
            // No head reached the server: answer here, in JSON.
            state.refuse(error == .headerOverflow ? .headersTooLarge : .malformedRequest)
        } else if !state.answered {
            failedInBody = true
            context.fireErrorCaught(error)  // the route reading the body answers (400), or has answered
        } else {
            state.close()  // answered before its body: a bad rest of the body only ends the connection
        }
    }
}
