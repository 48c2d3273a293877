import Foundation
import Testing

/// The chaos test (`sync-chaos`, see README "Chaos"): with fixed seeds, 4 devices (real `todo`
/// processes) and a real `sync-server` behind a fault-injecting proxy. It covers every fault kind —
/// requests dropped, replies lost after the server committed, 503s, replies cut short, partitions —
/// devices killed with SIGKILL mid-sync and mid-write, and the server killed with SIGKILL and
/// restarted on its database; then it checks every device equals the server, nothing is left
/// pending or waiting, no item is on the server twice, no acknowledged write was lost, and no item
/// that only one device wrote met a conflict. The seeds are ones that bite: with the defects of
/// issue 12 put back, seed 1 finds an edit lost behind a lost insert reply (point 4) and seed 6 a
/// device left with a stale row after taking the server's version (point 2).
@Suite(.serialized) struct ChaosTests {
    @Test(.timeLimit(.minutes(6)))
    func devicesUnderFaultsKillsAndRestartsConvergeWithNothingLost() throws {
        let result = try runProduct(
            "sync-chaos", ["--seed", "1", "--seed", "6", "--devices", "4", "--steps", "60", "--time-limit", "150"],
            environment: [:], timeout: 330)
        print(result.output)
        #expect(result.status == 0, "\(result.output)\(result.error)")
        #expect(result.output.contains("sync-chaos: 2 of 2 seed(s) passed"))
        // Every kind of fault happened (the run would prove less otherwise).
        for kind in ["request dropped", "503 answered", "reply lost after commit", "reply cut short"] {
            #expect(!result.output.contains("; 0 \(kind)") && !result.output.contains(" 0 \(kind),"), "no \(kind)")
        }
        #expect(!result.output.contains(" 0 devices mid-sync"))
        #expect(!result.output.contains(" 0 server (SIGKILL"))
    }
}
