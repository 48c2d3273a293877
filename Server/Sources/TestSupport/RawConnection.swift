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
    }

    private let channel: any Channel
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
    /// - Throws: NIO's error when the connection is refused.
    public init(port: Int, receiveBuffer: Int? = nil) async throws {
        let (stream, input) = AsyncStream<Event>.makeStream()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.autoRead, value: false)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Forwarder(input))
                }
            }
        if let receiveBuffer {
            bootstrap =
                bootstrap
                .channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: receiveBuffer))
        }
        channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
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

    /// Reads until the server closes the connection or `timeout` passes without a byte.
    ///
    /// - Returns: The bytes, and whether the server closed the connection.
    public func receiveAll(timeout: Duration = .seconds(20)) async -> (bytes: [UInt8], closed: Bool) {
        var bytes: [UInt8] = []
        while true {
            let chunk = await receive(upTo: .max, timeout: timeout)
            if chunk.isEmpty { return (bytes, isClosed) }
            bytes += chunk
        }
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
        let timer = channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout.nanoseconds))) {
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
            case .timeout:
                continue  // an earlier read's timer, which fired as its bytes came
            }
        }
        isClosed = true
    }

    /// Hands what the socket reads, and its end, to the connection.
    private final class Forwarder: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let input: AsyncStream<Event>.Continuation

        init(_ input: AsyncStream<Event>.Continuation) { self.input = input }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            input.yield(.bytes(buffer.readBytes(length: buffer.readableBytes) ?? []))
        }

        func channelInactive(context: ChannelHandlerContext) {
            input.yield(.closed)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)  // a reset: the connection's end
        }
    }
}

extension Duration {
    /// The duration in whole nanoseconds.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
