import Foundation
import SyncSQLite
import TestSupport

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

    /// The least time `roundTrips` exchanges moving `up`/`down` bytes take on this link: its physical reference.
    func reference(roundTrips: Int, upBytes: Int, downBytes: Int) -> Double {
        Double(roundTrips) * Measure.seconds(roundTrip) + Double(upBytes) * 8 / up + Double(downBytes) * 8 / down
    }
}

extension FaultProxy {
    /// A proxy to the server on 127.0.0.1:`upstreamPort` that delays what crosses it as `profile` says (TestSupport's
    /// fault proxy with the link policy alone).
    convenience init(profile: LinkProfile, upstreamPort: Int) async throws {
        try await self.init(
            upstreamPort: upstreamPort, link: .init(roundTrip: profile.roundTrip, up: profile.up, down: profile.down))
    }
}
