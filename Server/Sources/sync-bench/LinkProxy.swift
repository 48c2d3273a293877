import Foundation
import NIOCore
import NIOPosix
import SyncSQLite

/// A network link as `sync-bench --link NAME` simulates it: a round-trip time and a bandwidth each way.
struct LinkProfile: Sendable {
    let name: String
    let roundTrip: Duration
    /// Bits per second, server to client and client to server.
    let down: Double
    let up: Double

    static let all: [LinkProfile] = [
        LinkProfile(name: "lan", roundTrip: .zero, down: .infinity, up: .infinity),
        LinkProfile(name: "4g", roundTrip: .milliseconds(60), down: 20e6, up: 5e6),
        LinkProfile(name: "3g", roundTrip: .milliseconds(150), down: 2e6, up: 0.5e6),
    ]

    /// Whether it shapes at all (`lan` does not: the clients talk to the server directly).
    var isShaped: Bool { roundTrip > .zero || down.isFinite || up.isFinite }

    /// The least time `roundTrips` exchanges moving `up`/`down` bytes take on this link: its physical reference.
    func reference(roundTrips: Int, upBytes: Int, downBytes: Int) -> Double {
        Double(roundTrips) * Measure.seconds(roundTrip) + Double(upBytes) * 8 / up + Double(downBytes) * 8 / down
    }
}

/// A TCP proxy on 127.0.0.1 in front of a server that delays what crosses it as `profile` says: each chunk is
/// sent once the direction's link is free, takes its size / bandwidth to send, and arrives half a round trip
/// later. Both directions are shared by all connections (one device's link). It counts the bytes each way.
final class LinkProxy: Sendable {
    let port: Int
    private let channel: any Channel
    private let directions: (up: Direction, down: Direction)

    /// One direction of the link: when it is free again, and the bytes it carried.
    final class Direction: Sendable {
        private let state = Locked((freeAt: NIODeadline.uptimeNanoseconds(0), bytes: 0))
        let bitsPerSecond: Double
        let oneWay: TimeAmount

        init(bitsPerSecond: Double, oneWay: Duration) {
            self.bitsPerSecond = bitsPerSecond
            self.oneWay = .nanoseconds(Int64(Measure.seconds(oneWay) * 1e9))
        }

        /// When `bytes` sent now arrive at the other end.
        func arrival(of bytes: Int) -> NIODeadline {
            let sending =
                bitsPerSecond.isFinite ? TimeAmount.nanoseconds(Int64(Double(bytes) * 8 / bitsPerSecond * 1e9)) : .zero
            return state.withLock { state in
                let start = max(state.freeAt, .now())
                state.freeAt = start + sending
                state.bytes += bytes
                return state.freeAt + oneWay
            }
        }

        var bytes: Int { state.withLock { $0.bytes } }
    }

    /// Bytes carried so far, client to server and server to client.
    var bytes: (up: Int, down: Int) { (directions.up.bytes, directions.down.bytes) }

    /// Starts a proxy to the server listening on 127.0.0.1:`upstreamPort`.
    init(profile: LinkProfile, upstreamPort: Int) async throws {
        let oneWay = profile.roundTrip / 2
        let up = Direction(bitsPerSecond: profile.up, oneWay: oneWay)
        let down = Direction(bitsPerSecond: profile.down, oneWay: oneWay)
        directions = (up, down)
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                ClientBootstrap(group: inbound.eventLoop)
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMap { outbound in
                        inbound.pipeline.addHandler(Forwarder(to: outbound, over: up)).flatMap {
                            outbound.pipeline.addHandler(Forwarder(to: inbound, over: down))
                        }
                    }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
    }

    /// Stops accepting and closes the listening socket.
    func stop() async {
        try? await channel.close()
    }

    /// Sends what one side reads to the other over a direction of the link, and closes the other side once
    /// everything read before this side closed has arrived.
    private final class Forwarder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let peer: any Channel
        let direction: Direction
        private var last = NIODeadline.uptimeNanoseconds(0)

        init(to peer: any Channel, over direction: Direction) {
            self.peer = peer
            self.direction = direction
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            // Strictly later than the previous chunk, so that chunks arrive in order.
            last = max(direction.arrival(of: buffer.readableBytes), last + .nanoseconds(1))
            let peer = self.peer
            context.eventLoop.scheduleTask(deadline: last) { peer.writeAndFlush(buffer, promise: nil) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            let peer = self.peer
            context.eventLoop.scheduleTask(deadline: last + .nanoseconds(1)) { peer.close(promise: nil) }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
