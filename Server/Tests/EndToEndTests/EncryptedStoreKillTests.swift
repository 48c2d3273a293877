import Foundation
import OfflineSyncTesting
import SyncCore
import TestSupport
import Testing

/// `todo rekey` killed with SIGKILL at random points (issue 48): changing the key, making the store plain and
/// encrypting it again, each killed before, during or after its copy. After each kill exactly one of the old and the
/// new key (or plain) opens the store, and it holds every item; the next run starts from whichever stands. The time
/// after the commit is the moves alone (1–2 kills in 30 landed there in runs alone), so the deterministic cover of each
/// step is `StoreReencryptionTests.aChangeStoppedAtAnyStepLeavesTheOldStoreOrTheNew`; this is the real process's.
@Suite struct EncryptedStoreKillTests {
    @Test(.timeLimit(.minutes(6)))
    func rekeyKilledAnywhereLeavesTheOldStoreOrTheNewWhole() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rekey-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var keys: [String] = []
        for name in ["a", "b"] {
            let file = folder.appendingPathComponent("\(name).key").path
            try String(repeating: name == "a" ? "1f" : "e2", count: 32).write(
                toFile: file, atomically: true, encoding: .utf8)
            keys.append(file)
        }
        let base = [
            "TODO_STORE": folder.appendingPathComponent("todo.sqlite").path, "TODO_URL": "http://127.0.0.1:9",
        ]
        func todo(_ arguments: [String], key: String?, killAfter: Duration? = nil, started: StartTime? = nil)
            async throws -> CommandResult
        {
            try await runCommand(
                Products.path("todo"), arguments, environment: base.merging(["TODO_KEY_FILE": key ?? ""]) { $1 },
                killAfter: killAfter, started: { _ in started?.mark() })
        }
        /// The items the store shows opened with `key` (nil: plain), or nil when it does not open so.
        func items(_ key: String?) async throws -> Int? {
            let listed = try await todo(["list", "--all", "--json"], key: key)
            guard listed.status == 0 else { return nil }
            return try JSONValue(parsing: listed.output).arrayValue?.count
        }
        let text = String(repeating: "a line of an item that fills the store's pages ", count: 60)
        for index in 0..<12 {
            #expect(try await todo(["add", "\(index) \(text)"], key: keys[0]).status == 0)
        }
        // Kills fall anywhere in a run, by the time an unkilled run takes (measured by the first round).
        var random = SplitMix64(seed: 48)
        var current: String? = keys[0]
        var outcomes: [String: Int] = [:]
        // Kills fall over the time the last unkilled run took from its start (the first run is not killed): the
        // machine's load changes it, so it is measured again whenever a run finishes — from the process's start, as
        // the kill's clock is (spawning it took most of 1.2 s in the whole suite, and 47 runs in 48 ended unkilled).
        var span: Duration?
        var round = 0
        var kills = 0
        while kills < 10, round < 30 {
            let next: String? =
                current == nil ? keys[round % 2] : current == keys[0] ? (round % 3 == 0 ? nil : keys[1]) : keys[0]
            let arguments = ["rekey"] + (next.map { ["--to", $0] } ?? ["--plain"])
            // Half the kills uniformly over a run; half in its last fifth, where the copy is committed and moved.
            let killAfter = span.map { span in
                let micros = UInt64(max(1, span / .microseconds(1)))
                let at = round % 2 == 0 ? random.next() % micros : micros * 4 / 5 + random.next() % (micros / 5 + 1)
                return Duration.microseconds(Int64(at))
            }
            let started = StartTime()
            let run = try await todo(arguments, key: current, killAfter: killAfter, started: started)
            if run.wasKilled { kills += 1 } else { span = started.elapsed }
            let old = try await items(current)
            let new = try await items(next)
            #expect(
                (old == nil) != (new == nil),
                "round \(round): old opens \(old.map(String.init) ?? "no"), new \(new.map(String.init) ?? "no")")
            #expect((old ?? new) == 12, "round \(round): \(old ?? new ?? -1) items")
            if new != nil { current = next }
            let outcome = !run.wasKilled ? "finished" : new != nil ? "killed, new stands" : "killed, old stands"
            outcomes[outcome, default: 0] += 1
            round += 1
        }
        print("rekey kill rounds (the last unkilled run took \(span ?? .zero)): \(outcomes.sorted { $0.key < $1.key })")
        #expect(kills >= 5, "\(kills) kills in \(round) rounds")
        #expect(outcomes["killed, old stands", default: 0] > 0, "no kill fell before a commit")
    }
}

/// When a process started (set from `runCommand`'s `started`, on another task).
final class StartTime: @unchecked Sendable {  // @unchecked: `instant` behind `lock`.
    private let lock = NSLock()
    private var instant: ContinuousClock.Instant?

    func mark() { lock.withLock { instant = .now } }

    /// The time since the start (zero when it never started).
    var elapsed: Duration { lock.withLock { instant.map { .now - $0 } ?? .zero } }
}
