import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

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
        // Over the raw bytes: walking a `ByteBufferView` costs a debug build several calls a byte (7% of the server's
        // samples in the cursor races of LiveServerTests).
        return bytes.withUnsafeReadableBytes { raw in
            for byte in raw {
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
            state.phase = .head(
                lineBytes: lineBytes, headBytes: headBytes, lineEnded: lineEnded, terminator: terminator)
            return true
        }
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
    /// For each request whose head came and whose answer's head has not been written, in order: whether it asked the
    /// server to close the connection after its answer (`Connection: close`).
    var closesAfter: [Bool] = []
    /// Whether the response being sent said `Connection: close`: the connection closes once its last byte is out,
    /// whatever the HTTP codec decided (it reads the option's case and place less liberally than RFC 9110 §7.6.1).
    var closingAfterResponse = false

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
        case .head(let request):
            closesAfter.append(Self.asksToClose(request.headerFields[values: .connection]))
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

    /// Whether the answer being written is to a request whose body has not been read in full (or failed to parse).
    var answersUnreadRequest: Bool { failedInBody || requestsEnded <= responsesEnded }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .closed = state.phase {
            // Hummingbird answers a parse error it meets after the answer (while skipping the rest of a body).
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(var response):
            state.startSending()
            // The server closes after answering a request that asked it to: the answer says so (RFC 9112 §9.6), so
            // that a client — or a proxy that asked on a client's behalf — does not send the next request on it.
            // So does a final answer to a request whose body is still unread (413, 501, a malformed body): the server
            // closes after it (below), and a client that was not told could send its next request on the connection.
            let closes = closesAfter.isEmpty ? false : closesAfter.removeFirst()
            guard closes || answersUnreadRequest, response.status.code >= 200, response.headerFields[.connection] == nil
            else {
                return context.write(data, promise: promise)
            }
            response.headerFields[.connection] = "close"
            closingAfterResponse = true
            return context.write(wrapOutboundOut(.head(response)), promise: promise)
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
            } else if self.closingAfterResponse {
                self.closingAfterResponse = false
                context.close(promise: nil)
            }
        }
        // Answered before its own request's body was read (413, 501, a malformed body): the rest is not worth
        // reading. Not so when the request still being read is the next one.
        let answersUnreadRequest = answersUnreadRequest
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

    /// Whether `Connection` field values make the server close after the answer, read as bytes: they name the `close`
    /// option (any case, in a list) and not `keep-alive`, which NIO's HTTP/1 server lets win over it.
    static func asksToClose(_ values: [String]) -> Bool {
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let options = values.flatMap { value in
            value.utf8.split(separator: UInt8(ascii: ",")).map { token in
                let bytes = Array(token.drop(while: isSpace))
                return bytes[..<(bytes.lastIndex { !isSpace($0) }.map { $0 + 1 } ?? 0)].map { $0 | 0x20 }
            }
        }
        return options.contains(Array("close".utf8)) && !options.contains(Array("keep-alive".utf8))
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
