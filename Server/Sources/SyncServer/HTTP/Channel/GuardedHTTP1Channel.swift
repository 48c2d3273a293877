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
