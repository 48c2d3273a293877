import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SyncCore

/// One TCP connection to 127.0.0.1 for what no HTTP client sends: a request cut half way, a head and the next
/// request's head in one write, a reader that stops reading or reads 1 KB a second. It runs on NIO and never blocks a
/// thread: a test waiting on it suspends, and the tests and in-process servers beside it keep the cooperative pool.
///
/// The socket is read only when the test asks (NIO's `autoRead` off), so a connection nobody reads fills its receive
/// window and the server's sends stall, as with a slow client. Every read gives up after its `timeout`.
public actor RawConnection {
    private enum Event: Sendable {
        case bytes([UInt8])
        case closed
        case timeout(UInt64)
        /// The end of a ``receiveAll(timeout:)``: the idle time passed (its bytes came before as `.bytes`).
        case idle
    }

    private let channel: any Channel
    private let reader: NIOLoopBound<Reader>

    /// The raw connections' own event loop: not the one the in-process servers and HTTP clients share, so that a
    /// reader that must keep up (a page in flight at a deadline) is not queued behind their work.
    private static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private var events: AsyncStream<Event>.Iterator
    private let input: AsyncStream<Event>.Continuation
    private var pending: [UInt8] = []
    private var isClosed = false
    private var reads: UInt64 = 0

    /// Connects.
    ///
    /// - Parameters:
    ///   - port: The port on 127.0.0.1.
    ///   - receiveBuffer: The socket's receive buffer (`SO_RCVBUF`), and the most one read takes: a small one makes
    ///     a slow reader.
    ///   - request: Bytes to send the moment the connection is up, and then read everything the server sends (as
    ///     ``startReceivingAll(timeout:)``), both on the event loop: a server's idle timeout, which starts when it
    ///     accepts, then never sees a silent connection because the test process's pool was busy.
    /// - Throws: NIO's error when the connection is refused.
    public init(port: Int, receiveBuffer: Int? = nil, sending request: [UInt8]? = nil, timeout: Duration = .seconds(20))
        async throws
    {
        let (stream, input) = AsyncStream<Event>.makeStream()
        let added = NIOLockedValueBox<NIOLoopBound<Reader>?>(nil)
        var bootstrap = ClientBootstrap(group: Self.group)
            .channelOption(.autoRead, value: false)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let reader = Reader(input)
                    try channel.pipeline.syncOperations.addHandler(reader)
                    added.withLockedValue { $0 = NIOLoopBound(reader, eventLoop: channel.eventLoop) }
                }
            }
        if let receiveBuffer {
            bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
        }
        let idle = TimeAmount(timeout)
        channel = try await bootstrap.connect(host: "127.0.0.1", port: port).map { channel in
            if let request, let reader = added.withLockedValue({ $0 }) {
                reader.value.readAll(idle: idle)
                channel.writeAndFlush(ByteBuffer(bytes: request), promise: nil)
            }
            return channel
        }.get()
        guard let reader = added.withLockedValue({ $0 }) else { throw ChannelError.inappropriateOperationForState }
        self.reader = reader
        events = stream.makeAsyncIterator()
        self.input = input
    }

    deinit { channel.close(promise: nil) }

    /// Sends `text`, as much of it as the server takes (it may close early, refusing a request).
    ///
    /// - Returns: Whether all of it was handed to the network.
    @discardableResult public func send(_ text: String) async -> Bool { await send(bytes: Array(text.utf8)) }

    /// Sends `bytes`, as much of them as the server takes.
    ///
    /// - Returns: Whether all of them were handed to the network.
    @discardableResult public func send(bytes: [UInt8]) async -> Bool {
        (try? await channel.writeAndFlush(ByteBuffer(bytes: bytes))) != nil
    }

    /// Reads once: what has arrived, at most `count` bytes; empty once the server closed the connection or after
    /// `timeout` without a byte.
    public func receive(upTo count: Int, timeout: Duration = .seconds(20)) async -> [UInt8] {
        if pending.isEmpty, !isClosed { await read(timeout: timeout) }
        let taken = Array(pending.prefix(count))
        pending.removeFirst(taken.count)
        return taken
    }

    /// Starts reading everything the server sends, now and on NIO's event loop, without waiting for a thread of the
    /// cooperative pool (which a busy test process may not give for seconds); ``receiveAll(timeout:)`` then hands it
    /// over. A reader that must keep up with the server from a precise moment calls this first.
    public nonisolated func startReceivingAll(timeout: Duration = .seconds(20)) {
        let reader = self.reader
        let idle = TimeAmount(timeout)
        channel.eventLoop.execute { reader.value.readAll(idle: idle) }
    }

    /// Reads until the server closes the connection or `timeout` passes without a byte. The socket is read as fast as
    /// it can be, on NIO's event loop: a busy cooperative pool does not slow the reader down once it has started.
    ///
    /// - Returns: The bytes, and whether the server closed the connection.
    public func receiveAll(timeout: Duration = .seconds(20)) async -> (bytes: [UInt8], closed: Bool) {
        var bytes = pending
        pending = []
        if isClosed { return (bytes, true) }
        startReceivingAll(timeout: timeout)
        var iterator = events
        defer { events = iterator }
        while let event = await iterator.next(isolation: self) {
            switch event {
            case .bytes(let chunk): bytes += chunk
            case .closed:
                isClosed = true
                return (bytes, true)
            case .idle: return (bytes, false)
            case .timeout: continue  // an earlier read's timer
            }
        }
        isClosed = true
        return (bytes, true)
    }

    /// Reads until the end of the first response's head (`\r\n\r\n`), the connection's end or a `timeout` without a
    /// byte; what follows the head in the same read is kept for the next read.
    public func receiveHead(timeout: Duration = .seconds(20)) async -> [UInt8] {
        var bytes: [UInt8] = []
        while true {
            let chunk = await receive(upTo: .max, timeout: timeout)
            if chunk.isEmpty { return bytes }
            bytes += chunk
            if let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) {
                pending = Array(bytes[end.upperBound...]) + pending
                return Array(bytes[..<end.upperBound])
            }
        }
    }

    /// Closes the connection (the server sees its end).
    public func close() async {
        try? await channel.close()
        input.finish()
    }

    /// Whether the server has closed the connection (known once a read met its end).
    public var serverClosed: Bool { isClosed }

    /// One read of the socket, and the wait for its bytes, its end or `timeout`.
    private func read(timeout: Duration) async {
        reads += 1
        let read = reads
        let input = self.input
        let timer = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            input.yield(.timeout(read))
        }
        defer { timer.cancel() }
        channel.read()
        var iterator = events
        defer { events = iterator }
        while let event = await iterator.next(isolation: self) {
            switch event {
            case .bytes(let bytes):
                pending += bytes
                return
            case .closed:
                isClosed = true
                return
            case .timeout(let expired) where expired == read:
                return
            case .timeout, .idle:
                continue  // an earlier read's timer, which fired as its bytes came
            }
        }
        isClosed = true
    }

    /// Hands what the socket reads, and its end, to the connection: each read as it comes, or — while it reads
    /// everything (``readAll(idle:)``) — all of it at once, read on the event loop until the end or an idle time.
    private final class Reader: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let input: AsyncStream<Event>.Continuation
        private var context: ChannelHandlerContext?
        private var collected: [UInt8]?
        private var idle = TimeAmount.zero
        private var idleTimer: Scheduled<Void>?

        init(_ input: AsyncStream<Event>.Continuation) { self.input = input }

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }

        /// Reads until the connection ends or `idle` passes without a byte, then hands it all over (once: a second call
        /// while it reads changes nothing).
        func readAll(idle: TimeAmount) {
            guard let context, collected == nil else { return }
            collected = []
            self.idle = idle
            armIdleTimer()
            context.channel.setOption(.autoRead, value: true).whenComplete { _ in }
            context.read()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
            if collected != nil {
                collected! += bytes
                armIdleTimer()
            } else {
                input.yield(.bytes(bytes))
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            idleTimer?.cancel()
            if let collected { input.yield(.bytes(collected)) }
            collected = nil
            input.yield(.closed)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)  // a reset: the connection's end
        }

        private func armIdleTimer() {
            idleTimer?.cancel()
            guard let context else { return }
            idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: idle) { [self] in
                guard let collected else { return }
                self.collected = nil
                context.channel.setOption(.autoRead, value: false).whenComplete { _ in }
                input.yield(.bytes(collected))
                input.yield(.idle)
            }
        }
    }
}
