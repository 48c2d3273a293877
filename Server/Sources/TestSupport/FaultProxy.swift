import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import OfflineSyncTesting

/// A TCP proxy on 127.0.0.1 in front of a server, on NIO (no thread of its own, no blocking call), with two policies
/// that may be combined:
/// - **faults** (`sync-chaos`): each request is, at random (seeded), passed, dropped before the server sees it,
///   answered 503 without reaching the server, forwarded with its reply lost (the server committed), or forwarded with
///   its reply cut short; while partitioned every new request is refused. Requests are forwarded with
///   `Connection: close`, so each connection carries one request and the decision is made on its head.
/// - **link** (`sync-bench --link`): what crosses it is delayed as a link with a round-trip time and a bandwidth each
///   way would: each chunk is sent once the direction is free, takes its size / bandwidth, and arrives half a round
///   trip later. Both directions are shared by all connections (one device's link).
public final class FaultProxy: Sendable {
    /// What happened to a request.
    public enum Fault: String, CaseIterable, Sendable {
        case dropRequest = "request dropped"
        case serviceUnavailable = "503 answered"
        case loseReply = "reply lost after commit"
        case cutReply = "reply cut short"
        case partitioned = "refused while partitioned"
    }

    /// The faults policy: `rate` is the chance that a request meets one of the four faults, `latency` the wait of each
    /// request before it is forwarded.
    public struct Faults: Sendable {
        public var seed: UInt64
        public var rate: Double
        public var latency: Duration

        public init(seed: UInt64, rate: Double, latency: Duration = .zero) {
            (self.seed, self.rate, self.latency) = (seed, rate, latency)
        }
    }

    /// The link policy: a round-trip time and bits per second each way (`.infinity`: no limit).
    public struct Link: Sendable {
        public var roundTrip: Duration
        public var up: Double
        public var down: Double

        public init(roundTrip: Duration, up: Double, down: Double) {
            (self.roundTrip, self.up, self.down) = (roundTrip, up, down)
        }
    }

    private struct State {
        var random: SplitMix64
        var rate: Double
        var isPartitioned = false
        var counts: [Fault: Int] = [:]
        var passed = 0
        var pagesAhead = 0
    }

    public let port: Int
    private let channel: any Channel
    private let state: NIOLockedValueBox<State>?
    private let directions: (up: Direction, down: Direction)?

    /// Starts a proxy to the server on 127.0.0.1:`upstreamPort` with the policies given (neither: a plain proxy).
    ///
    /// - Throws: NIO's error when it cannot listen.
    public init(upstreamPort: Int, faults: Faults? = nil, link: Link? = nil) async throws {
        let state = faults.map { NIOLockedValueBox(State(random: SplitMix64(seed: $0.seed), rate: $0.rate)) }
        let directions = link.map {
            (
                Direction(bitsPerSecond: $0.up, oneWay: $0.roundTrip / 2),
                Direction(bitsPerSecond: $0.down, oneWay: $0.roundTrip / 2)
            )
        }
        let latency = TimeAmount(faults?.latency ?? .zero)
        let decide: (@Sendable ([UInt8]) -> Fault?)? = state.map { state in
            { @Sendable head in FaultProxy.decide(state, head) }
        }
        let (up, down) = (directions?.0, directions?.1)
        self.state = state
        self.directions = directions
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture {
                    try inbound.pipeline.syncOperations.addHandler(
                        Inbound(upstreamPort: upstreamPort, decide: decide, latency: latency, up: up, down: down))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
    }

    /// Stops accepting (connections in progress finish).
    public func stop() async { try? await channel.close() }

    /// Starts or ends a network partition.
    public func setPartitioned(_ value: Bool) { state?.withLockedValue { $0.isPartitioned = value } }

    /// Sets the chance that a request meets a fault (0 pauses the faults; a run's opening scripted without them).
    public func setFaultRate(_ rate: Double) { state?.withLockedValue { $0.rate = rate } }

    /// Heals: no more faults or partition.
    public func heal() {
        state?.withLockedValue {
            $0.isPartitioned = false
            $0.rate = 0
        }
    }

    /// Faults injected so far, by kind, requests passed, and page requests that asked ahead (`$skip`: a pull asking
    /// the page after the next one in the same round trip).
    public var tally: (faults: [Fault: Int], passed: Int, pagesAhead: Int) {
        state?.withLockedValue { ($0.counts, $0.passed, $0.pagesAhead) } ?? ([:], 0, 0)
    }

    /// Bytes carried so far by the link, client to server and server to client.
    public var bytes: (up: Int, down: Int) { (directions?.up.bytes ?? 0, directions?.down.bytes ?? 0) }

    /// The fate of a request whose head is `head`.
    private static func decide(_ state: NIOLockedValueBox<State>, _ head: [UInt8]) -> Fault? {
        let requestLine = head.prefix { $0 != UInt8(ascii: "\r") }
        return state.withLockedValue { state in
            if requestLine.firstRange(of: Array("$skip=".utf8)) != nil { state.pagesAhead += 1 }
            let fault: Fault?
            if state.isPartitioned {
                fault = .partitioned
            } else if state.random.nextDouble() < state.rate {
                fault = [.dropRequest, .serviceUnavailable, .loseReply, .cutReply][Int(state.random.next() % 4)]
            } else {
                fault = nil
            }
            if let fault { state.counts[fault, default: 0] += 1 } else { state.passed += 1 }
            return fault
        }
    }
}

extension FaultProxy {
    /// One direction of the link: when it is free again, and the bytes it carried.
    final class Direction: Sendable {
        private let state = NIOLockedValueBox((freeAt: NIODeadline.uptimeNanoseconds(0), bytes: 0))
        let bitsPerSecond: Double
        let oneWay: TimeAmount

        init(bitsPerSecond: Double, oneWay: Duration) {
            self.bitsPerSecond = bitsPerSecond
            self.oneWay = TimeAmount(oneWay)
        }

        /// When `bytes` sent now arrive at the other end.
        func arrival(of bytes: Int) -> NIODeadline {
            let sending =
                bitsPerSecond.isFinite ? TimeAmount.nanoseconds(Int64(Double(bytes) * 8 / bitsPerSecond * 1e9)) : .zero
            return state.withLockedValue { state in
                let start = max(state.freeAt, .now())
                state.freeAt = start + sending
                state.bytes += bytes
                return state.freeAt + oneWay
            }
        }

        var bytes: Int { state.withLockedValue { $0.bytes } }
    }

    /// Sends chunks to a channel over a direction of the link (at once without one), in order, and closes it after the
    /// last.
    struct Sender {
        let peer: any Channel
        let direction: Direction?
        private var last = NIODeadline.uptimeNanoseconds(0)

        init(to peer: any Channel, over direction: Direction?) { (self.peer, self.direction) = (peer, direction) }

        mutating func send(_ bytes: [UInt8]) {
            guard !bytes.isEmpty else { return }
            let (peer, buffer) = (self.peer, ByteBuffer(bytes: bytes))
            guard let direction else { return peer.writeAndFlush(buffer, promise: nil) }
            // Strictly later than the previous chunk, so that chunks arrive in order.
            last = max(direction.arrival(of: bytes.count), last + .nanoseconds(1))
            peer.eventLoop.scheduleTask(deadline: last) { peer.writeAndFlush(buffer, promise: nil) }
        }

        func close() {
            let peer = self.peer
            peer.eventLoop.scheduleTask(deadline: max(last + .nanoseconds(1), .now())) { peer.close(promise: nil) }
        }
    }

    /// The client's side: reads the request's head (with the faults policy), decides, and forwards to the server.
    final class Inbound: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let upstreamPort: Int
        let decide: (@Sendable ([UInt8]) -> Fault?)?
        let latency: TimeAmount
        let up: Direction?
        let down: Direction?
        private var head: [UInt8] = []
        private var decided = false
        private var queued: [UInt8] = []
        private var upstream: Sender?

        init(
            upstreamPort: Int, decide: (@Sendable ([UInt8]) -> Fault?)?, latency: TimeAmount, up: Direction?,
            down: Direction?
        ) {
            (self.upstreamPort, self.decide, self.latency, self.up, self.down) =
                (upstreamPort, decide, latency, up, down)
        }

        func channelActive(context: ChannelHandlerContext) {
            if decide == nil { forward(context: context, fault: nil) }  // a plain link: connect at once
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
            guard decided || decide == nil else {
                head += bytes
                guard let end = head.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
                decided = true
                let rest = Array(head[end.upperBound...])
                let request = Self.closingConnection(Array(head[..<end.upperBound]))
                head = []
                let fault = decide?(request)
                switch fault {
                case .partitioned?, .dropRequest?:
                    context.close(promise: nil)
                case .serviceUnavailable?:
                    let body = #"{"error":"Service unavailable (injected by the fault proxy)."}"#
                    let answer =
                        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                        + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                    let channel = context.channel
                    context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer))).whenComplete { _ in
                        channel.close(promise: nil)
                    }
                case .loseReply?, .cutReply?, nil:
                    queued = request + rest
                    forward(context: context, fault: fault)
                }
                return
            }
            if upstream != nil { upstream!.send(bytes) } else { queued += bytes }
        }

        /// A plain link passes the client's end on (after what it sent). With the faults policy a client that goes
        /// away (a device killed mid-request) does not end the server's side: what it sent is delivered and answered,
        /// as the old chaos proxy did, so that the only faults are the ones the policy injects; the server closes its
        /// side after the answer (`Connection: close`), or after its body timeout for a cut body.
        func channelInactive(context: ChannelHandlerContext) {
            if decide == nil { upstream?.close() }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

        /// Connects to the server (after the latency) and sends it what came so far.
        private func forward(context: ChannelHandlerContext, fault: Fault?) {
            let client = context.channel
            let (port, down) = (upstreamPort, self.down)
            let this = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: latency) {
                ClientBootstrap(group: client.eventLoop)
                    .channelInitializer { server in
                        server.eventLoop.makeCompletedFuture {
                            try server.pipeline.syncOperations.addHandler(
                                Outbound(to: Sender(to: client, over: down), fault: fault))
                        }
                    }
                    .connect(host: "127.0.0.1", port: port)
                    .whenComplete { result in
                        switch result {
                        case .success(let server):
                            let handler = this.value
                            handler.upstream = Sender(to: server, over: handler.up)
                            handler.upstream!.send(handler.queued)
                            handler.queued = []
                        case .failure:
                            client.close(promise: nil)  // the server is down
                        }
                    }
            }
        }

        /// `head` with its `Connection` headers replaced by `Connection: close`.
        static func closingConnection(_ head: [UInt8]) -> [UInt8] {
            let lines = head.split(separator: UInt8(ascii: "\n")).map { line in
                line.last == UInt8(ascii: "\r") ? Array(line.dropLast()) : Array(line)
            }
            let connection = Array("connection:".utf8)
            let kept = lines.filter { line in
                !line.isEmpty
                    && !(line.count >= connection.count
                        && zip(line, connection).allSatisfy { $0 | 0x20 == $1 | 0x20 })
            }
            return (kept + [Array("Connection: close".utf8), [], []]).joined(separator: Array("\r\n".utf8)).map { $0 }
        }
    }

    /// The server's side: passes the reply to the client, loses it, or cuts its body in half.
    final class Outbound: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private var client: Sender
        let fault: Fault?
        private var collected: [UInt8] = []

        init(to client: Sender, fault: Fault?) { (self.client, self.fault) = (client, fault) }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
            switch fault {
            case .loseReply?: break
            case .cutReply?: collected += bytes
            default: client.send(bytes)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if fault == .cutReply, let end = collected.firstRange(of: Array("\r\n\r\n".utf8)) {
                let body = collected[end.upperBound...]
                client.send(Array(collected[..<end.upperBound] + body.prefix(body.count / 2)))
            }
            client.close()
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }
}
