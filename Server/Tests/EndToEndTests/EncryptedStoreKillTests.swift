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
@Suite(.timeLimit(.minutes(3))) struct EncryptedStoreKillTests {
    @Test(.timeLimit(.minutes(3)))  // a hang guard: the README's test command starts it when the case starts
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
        func todo(_ arguments: [String], key: String?) async throws -> CommandResult {
            try await runCommand(
                Products.path("todo"), arguments, environment: base.merging(["TODO_KEY_FILE": key ?? ""]) { $1 })
        }
        /// `todo rekey …` run and killed by a shell, which also times it: the kill's clock is not this process's
        /// cooperative pool (in the whole suite, a sleep there woke after the process had ended: no kill landed).
        /// Returns whether it was killed, and how long an unkilled run took.
        func rekey(_ arguments: [String], key: String?, killAfter: Duration?) async throws -> (Bool, Duration) {
            let script = """
                start=$(date +%s%N)
                "$TODO" "$@" >/dev/null 2>&1 &
                pid=$!
                if [ -n "$KILL_AFTER" ]; then sleep "$KILL_AFTER"; kill -9 "$pid" 2>/dev/null; fi
                wait "$pid"; status=$?
                echo "$status $(( $(date +%s%N) - start ))"
                """
            let seconds = killAfter.map { String(format: "%.6f", Double($0 / .microseconds(1)) / 1_000_000) } ?? ""
            let run = try await runCommand(
                "/bin/sh", ["-c", script, "sh"] + arguments,
                environment: base.merging([
                    "TODO_KEY_FILE": key ?? "", "TODO": Products.path("todo"), "KILL_AFTER": seconds,
                ]) { $1 })
            let words = run.output.split(separator: " ").map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            guard words.count == 2, let status = words[0], let nanoseconds = words[1] else {
                throw CocoaError(.fileReadCorruptFile, userInfo: [NSDebugDescriptionErrorKey: run.output + run.error])
            }
            return (status == 128 + 9, .nanoseconds(nanoseconds))
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
        // Kills fall over the time the last unkilled run took (the first run is not killed): the machine's load
        // changes it, so it is measured again whenever a run finishes.
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
            let (killed, took) = try await rekey(arguments, key: current, killAfter: killAfter)
            if killed { kills += 1 } else { span = took }
            let old = try await items(current)
            let new = try await items(next)
            #expect(
                (old == nil) != (new == nil),
                "round \(round): old opens \(old.map(String.init) ?? "no"), new \(new.map(String.init) ?? "no")")
            #expect((old ?? new) == 12, "round \(round): \(old ?? new ?? -1) items")
            if new != nil { current = next }
            let outcome = !killed ? "finished" : new != nil ? "killed, new stands" : "killed, old stands"
            outcomes[outcome, default: 0] += 1
            round += 1
        }
        print("rekey kill rounds (the last unkilled run took \(span ?? .zero)): \(outcomes.sorted { $0.key < $1.key })")
        #expect(kills >= 5, "\(kills) kills in \(round) rounds")
        #expect(outcomes["killed, old stands", default: 0] > 0, "no kill fell before a commit")
    }
}
