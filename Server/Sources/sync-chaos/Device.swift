import Crypto
import Foundation
import OfflineSyncTesting
import SyncCore
import TestSupport

/// One device: a store file used by `todo`, as an app would, with what it did recorded for the checks. Its commands
/// run in one `todo session` process (``CommandSession``) until a kill ends it; the next command starts another, as
/// an app started again would. Only its own thread touches it until the run joins.
final class Device: @unchecked Sendable {  // @unchecked: used by one thread at a time (see above).
    let index: Int
    /// The device's `todo session`.
    let todo: CommandSession
    var random: SplitMix64
    private var counter = 0

    /// Short ids (8 characters) of adds that `todo add` acknowledged.
    var acknowledgedAdds: [String] = []
    /// Every edit started, in order: item id, the unique text it set, and whether `todo` acknowledged it.
    var edits: [(id: String, text: String, acknowledged: Bool)] = []
    /// Whether this is a run by fields (``ChaosRun/Settings/fields``): edits of one field of the first six items.
    var byFields = false
    /// In a run by fields: whether this device edits only `complete` (else only the text).
    var editsCompletion = false
    /// The fields each conflict shown to the device named as changed on both sides, by item.
    var conflictFields: [String: Set<String>] = [:]
    /// Every `complete`/`reopen` started, in order: item id, the value it set, and whether `todo` acknowledged it.
    var completions: [(id: String, complete: Bool, acknowledged: Bool)] = []
    /// Ids of items a delete was started for (acknowledged or killed).
    var deletes: Set<String> = []
    /// Ids of items whose delete `todo` acknowledged.
    var acknowledgedDeletes: Set<String> = []
    /// In a run with tombstones that expire (``ChaosRun/Settings/retention``): whether the device goes away at random,
    /// how often it did, and what its syncs said of the listings that followed.
    var goesAway = false
    var awaySpells = 0
    var reconciliations = 0
    var reconciledRows = 0
    /// Ids of items whose conflict this device resolved by taking the server's version.
    var yielded: Set<String> = []
    /// Ids of items this device was shown a conflict or refusal for.
    var conflicted: Set<String> = []
    /// What it was shown for each of them, last: the operation, the status and the server's message (for a report).
    var shownFor: [String: String] = [:]
    var commands = 0
    /// Every command run, in order, with how it ended and the first lines it wrote: written beside the stores when a
    /// seed fails (`device-N.history`), to trace a problem.
    var history: [String] = []
    /// What the device wrote and read, for the consistency checks (docs/consistency.md).
    var events = DeviceHistory()
    var syncs = 0
    var killedSyncs = 0
    var killedWrites = 0
    var conflictsShown = 0
    /// Changes `todo sync` reported merged with other devices' edits, with no conflict shown.
    var merges = 0
    var resolutions: [String: Int] = [:]
    /// What the last sync's `resolveWhatIsShown` picked: each change's id, status and choice (for a failure report).
    var lastResolutions: [String] = []
    /// The changes kept (re-sent) while settling; shown again, they are let go.
    var keptWhileSettling: Set<String> = []
    var failures: [String] = []
    /// In a shared run (``ChaosRun/Settings/shared``): the device's user, and how many shares and unshares it made.
    var user: String?
    var shares = 0
    var unshares = 0
    /// Change sets made during the chaos (acknowledged), and those killed mid-way: in a shared run, lists with their
    /// owners (`lists new`); in a run by fields, two items marked done or not at once.
    var setsMade = 0
    var setsKilled = 0
    /// Change sets `todo sync` reported applied whole, and refused whole (then sent again after a resolution).
    var setsPushed = 0
    var setsRefused = 0
    /// In a shared run: the users whose change sets are atomic (the v2 devices'), and the device's reads of its lists
    /// checked for half a set of theirs (a list without its owner), with what they found.
    var atomicUsers: Set<String> = []
    var listReadsChecked = 0
    var halfSetsRead: [String] = []
    /// Completed syncs whose pull of lists and members applied nothing because they kept changing through its passes.
    var listPullsNotApplied = 0
    /// The other devices' users, whom this one shares its list with.
    var others: [String] = []
    /// In a run with files (``ChaosRun/Settings/attachments``): where the device keeps the files it attaches, and
    /// each attach started — item, the file's SHA-256, its size, and whether `todo attach` acknowledged it.
    var files: URL?
    var attaches: [(id: String, hash: String, size: Int, acknowledged: Bool)] = []
    /// How long the device's last writes (up to 16) took, in milliseconds, from the line sent to the end line: those
    /// that ran to their end in a session already running (``writeKillDelay()``).
    private var writeTimes: [Double] = []

    init(
        index: Int, todo: String, store: String, url: String, seed: UInt64, token: String? = nil,
        protocol wireProtocol: String = "v2", keyFile: String? = nil
    ) {
        self.index = index
        let environment = ["TODO_STORE": store, "TODO_URL": url, "TODO_PROTOCOL": wireProtocol]
            .merging(token.map { ["TODO_TOKEN": $0] } ?? [:]) { $1 }
            .merging(keyFile.map { ["TODO_KEY_FILE": $0] } ?? [:]) { $1 }
        self.todo = CommandSession(
            todo, ["session"], environment: environment, started: Children.started, ended: Children.ended)
        random = SplitMix64(seed: seed)
    }

    var name: String { "device \(index)" }

    func run(_ arguments: [String], killAfter: Int? = nil) async throws -> CommandResult {
        commands += 1
        let line = String(decoding: try JSONEncoder().encode(arguments), as: UTF8.self)
        let (processes, start) = (todo.processesStarted, ContinuousClock.now)
        let result = try await todo.run(line, killAfter: killAfter.map { .milliseconds($0) })
        let isWrite =
            ["add", "edit", "complete", "reopen"].contains(arguments.first ?? "")
            || arguments.starts(with: ["lists", "new"])
        if isWrite, !result.wasKilled, result.status == 0, todo.processesStarted == processes {
            writeTimes = writeTimes.suffix(15) + [(ContinuousClock.now - start) / .milliseconds(1)]
        }
        let said = (result.output + result.error).split(separator: "\n").prefix(3).joined(separator: " / ")
        // Up to 100 kB a command: a read's whole JSON line, so that a failed run's reads can be read back from its
        // folder (cut at 1,500 bytes, they were not JSON any more).
        history.append(
            "\(commands): todo \(arguments.joined(separator: " ")) → "
                + (result.wasKilled ? "killed" : "\(result.status)") + (said.isEmpty ? "" : ": \(said.prefix(100_000))")
        )
        return result
    }

    private func uniqueText(_ kind: String) -> String {
        counter += 1
        return "d\(index)-\(kind)\(counter)"
    }

    /// The device's items: id → (text, complete).
    func items() async throws -> [String: String] {
        let result = try await run(["list", "--all", "--json"])
        guard result.status == 0 else { throw ChaosError("\(name): list failed: \(result.error)") }
        var items: [String: String] = [:]
        var read: [String: DeviceHistory.ReadItem] = [:]
        for item in try JSONValue(parsing: result.output).arrayValue ?? [] {
            let (id, text, complete) =
                (item["id"]?.stringValue ?? "", item["text"]?.stringValue ?? "", item["complete"]?.boolValue ?? false)
            items[id] = "\(text)|\(complete)"
            read[id] = .init(
                fields: ["text": text, "complete": String(complete)], stamp: item["updatedAt"]?.stringValue ?? "")
        }
        events.record(.read(read))
        return items
    }

    /// When to kill a write (add, edit, complete, `lists new`) with SIGKILL, in milliseconds: a seeded 0.2–1.4 of the
    /// device's typical write (the median of ``writeTimes``; 20 ms before the first), so that most kills land mid-write
    /// whatever the build and the machine: a release `todo` writes in a few milliseconds, a debug one in 12–25.
    func writeKillDelay() -> Int {
        let typical = writeTimes.isEmpty ? 20 : writeTimes.sorted()[writeTimes.count / 2]
        return max(1, Int((0.2 + 1.2 * random.nextDouble()) * typical))
    }

    /// One random step: add, edit, complete, delete, sync, or one of them killed with SIGKILL; in a shared run, also
    /// a share or an unshare of the device's own list.
    func step() async throws {
        let roll = random.nextDouble()
        if user != nil, roll < 0.13 { return try await changeSharing(share: roll < 0.06) }
        if user != nil, roll < 0.19 {
            return try await makeList(killAfter: roll < 0.16 ? writeKillDelay() : nil)
        }
        if files != nil, roll < 0.15 {
            return try await attach(killAfter: roll < 0.03 ? 20 + Int(random.next() % 200) : nil)
        }
        if goesAway, roll < 0.05 { return try await goAway() }
        if byFields {
            // Mostly edits of a few shared rows, and syncs seldom enough that devices edit them at once.
            switch roll {
            case ..<0.08: try await add(killAfter: nil)
            case ..<0.68: try await edit(killAfter: nil)
            case ..<0.70: try await delete()
            case ..<0.85: _ = try await sync(killAfter: nil)
            case ..<0.92: _ = try await sync(killAfter: 5 + Int(random.next() % 400))
            default: try await edit(killAfter: writeKillDelay())
            }
            return
        }
        switch roll {
        case ..<0.28: try await add(killAfter: nil)
        case ..<0.50: try await edit(killAfter: nil)
        case ..<0.58: try await delete()
        case ..<0.78: try await sync(killAfter: nil)
        case ..<0.88: try await sync(killAfter: 5 + Int(random.next() % 400))
        case ..<0.94: try await add(killAfter: writeKillDelay())
        default: try await edit(killAfter: writeKillDelay())
        }
    }

    func add(killAfter: Int?) async throws {
        var arguments = ["add", uniqueText("a")]
        if user != nil {
            // Into one of the lists the device holds (its own, or one shared with it and not yet left).
            let lists = try await self.lists()
            guard !lists.isEmpty else { return }
            arguments += ["--list", lists[Int(random.next() % UInt64(lists.count))]]
        }
        let result = try await run(arguments, killAfter: killAfter)
        if killAfter != nil, result.wasKilled { killedWrites += 1 }
        if result.status == 0, let line = result.output.split(separator: "\n").first, line.hasPrefix("Added ") {
            acknowledgedAdds.append(String(line.dropFirst(6).prefix(8)))
        }
    }

    /// Edits an item: half the time one of the last three this device added (people edit what they
    /// just wrote), else any item it has.
    func edit(killAfter: Int?) async throws {
        let items = try await items()
        let ids = items.keys.sorted()
        guard !ids.isEmpty else { return try await add(killAfter: killAfter) }
        let recent = acknowledgedAdds.suffix(3).compactMap { short in ids.first { $0.hasPrefix(short) } }
        // By fields, one of the first few items: the point is that devices meet on the same rows.
        let pool = byFields ? Array(ids.prefix(6)) : !recent.isEmpty && random.nextDouble() < 0.5 ? recent : ids
        let id = pool[Int(random.next() % UInt64(pool.count))]
        if editsCompletion {
            // A third of the time, two items at once: one change set, which meets the other devices' edits of both.
            var targets = [id]
            if pool.count > 1, random.next() % 3 == 0 {
                let others = pool.filter { $0 != id }
                targets.append(others[Int(random.next() % UInt64(others.count))])
            }
            let complete = !(items[id]?.hasSuffix("|true") ?? false)
            let result = try await run([complete ? "complete" : "reopen"] + targets, killAfter: killAfter)
            if killAfter != nil, result.wasKilled { killedWrites += 1 }
            if targets.count > 1 {
                if result.status == 0 { setsMade += 1 } else if result.wasKilled { setsKilled += 1 }
            }
            for target in targets {
                completions.append((target, complete, result.status == 0))
                events.record(
                    result.status == 0
                        ? .wrote(item: target, field: "complete", value: String(complete)) : .unsure(item: target))
            }
            return
        }
        let text = uniqueText("e")
        let result = try await run(["edit", id, text], killAfter: killAfter)
        if killAfter != nil, result.wasKilled { killedWrites += 1 }
        edits.append((id, text, result.status == 0))
        events.record(result.status == 0 ? .wrote(item: id, field: "text", value: text) : .unsure(item: id))
    }

    /// Attaches a new file of 1–8 MB (seeded bytes) to one of the device's items, maybe killed mid-way.
    func attach(killAfter: Int?) async throws {
        guard let files else { return }
        let ids = try await items().keys.sorted()
        guard !ids.isEmpty else { return try await add(killAfter: nil) }
        let id = ids[Int(random.next() % UInt64(ids.count))]
        let size = 1_000_000 + Int(random.next() % 7_000_001)
        // A seeded block of 64 KiB, repeated: distinct files, filled in milliseconds even by a debug build.
        let block = (0..<(1 << 16)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        while bytes.count < size { bytes += block.prefix(size - bytes.count) }
        let hash = sha256(bytes)
        let file = files.appendingPathComponent(hash)
        try Data(bytes).write(to: file)
        let result = try await run(["attach", id, file.path], killAfter: killAfter)
        if killAfter != nil, result.wasKilled { killedWrites += 1 }
        attaches.append((id, hash, size, result.status == 0))
        try? FileManager.default.removeItem(at: file)
    }

    /// Every item of the device that names a file: `todo open` writes it out, and its bytes must hash to its name.
    /// Returns the problems and the files checked.
    func checkFiles() async throws -> (problems: [String], checked: Int) {
        let result = try await run(["list", "--all", "--json"])
        guard result.status == 0, let files else { return (["\(name): list failed: \(result.error)"], 0) }
        var problems: [String] = []
        var checked = 0
        for item in try JSONValue(parsing: result.output).arrayValue ?? [] {
            guard let id = item["id"]?.stringValue, let hash = item["file"]?.stringValue else { continue }
            let out = files.appendingPathComponent("open-\(checked)")
            let opened = try await run(["open", id, "-o", out.path])
            defer { try? FileManager.default.removeItem(at: out) }
            guard opened.status == 0, let data = FileManager.default.contents(atPath: out.path) else {
                problems.append("\(name): cannot open the file of \(id.prefix(8)): \(opened.error)")
                continue
            }
            let actual = sha256(data)
            if actual != hash { problems.append("\(name): the file of \(id.prefix(8)) is not its bytes") }
            checked += 1
        }
        return (problems, checked)
    }

    func delete() async throws {
        let ids = try await items().keys.sorted()
        guard !ids.isEmpty else { return }
        let id = ids[Int(random.next() % UInt64(ids.count))]
        deletes.insert(id)
        if try await run(["delete", id]).status == 0 { acknowledgedDeletes.insert(id) }
        events.record(.unsure(item: id))
    }

    /// A spell away, longer than the server keeps tombstones: an edit or a delete of what the device holds, made
    /// offline, then 3–5 s with no sync while the others go on; its next sync meets the tombstones removed meanwhile.
    func goAway() async throws {
        awaySpells += 1
        if random.next() % 2 == 0 { try await edit(killAfter: nil) } else { try await delete() }
        try await Task.sleep(for: .milliseconds(3_000 + Int(random.next() % 2_000)))
    }

    /// `todo sync`; when it reports changes waiting, the person looks at them and picks a choice —
    /// during the chaos only half the time (conflicts also wait across later syncs), when settling always.
    @discardableResult
    func sync(killAfter: Int?, settling: Bool = false) async throws -> CommandResult {
        syncs += 1
        lastResolutions = []
        let result = try await run(["sync"], killAfter: killAfter)
        events.record(.synced)
        if killAfter != nil, result.wasKilled { killedSyncs += 1 }
        // "…: sent N change(s), M merged with other devices' edits, K change set(s) applied whole, received …"
        for part in result.output.split(separator: ", ") {
            let count = Int(part.prefix { $0.isNumber }) ?? 0
            if part.hasSuffix(" merged with other devices' edits") { merges += count }
            if part.hasSuffix(" change set(s) applied whole") { setsPushed += count }
            if part.hasSuffix(" change set(s) refused whole") { setsRefused += count }
        }
        if result.output.contains("Lists and members kept changing") { listPullsNotApplied += 1 }
        // "Away longer than the server keeps deletes: … (N listing(s)), removed M deleted meanwhile."
        if let line = result.output.split(separator: "\n").first(where: { $0.hasPrefix("Away longer") }) {
            let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            if numbers.count >= 2 {
                reconciliations += numbers[numbers.count - 2]
                reconciledRows += numbers[numbers.count - 1]
            }
        }
        if result.status == 1, settling || random.nextDouble() < 0.5 {
            try await resolveWhatIsShown(settling: settling)
        }
        return result
    }

    /// Reads `todo conflicts --json` and resolves each with one of the choices it offers. While settling, a change
    /// kept once and shown again is let go (any other choice): a person does not re-send forever what the server
    /// refuses each time — and a run of "keep mine" in the seeded choices (seed 2's device 1 drew twelve) left a
    /// refused change pending after the twelve settling rounds.
    func resolveWhatIsShown(settling: Bool = false) async throws {
        let shown = try await run(["conflicts", "--json"])
        guard shown.status == 0 else { return }
        for conflict in try JSONValue(parsing: shown.output).arrayValue ?? [] {
            guard let id = conflict["id"]?.stringValue, let choices = conflict["choices"]?.arrayValue,
                !choices.isEmpty
            else {
                failures.append("\(name): a conflict without choices: \(conflict.serialized())")
                continue
            }
            conflictsShown += 1
            conflicted.insert(id)
            for field in conflict["fields"]?.arrayValue ?? [] {
                if let field = field.stringValue { conflictFields[id, default: []].insert(field) }
            }
            shownFor[id] =
                "\(conflict["operation"]?.stringValue ?? "?") \(conflict["status"]?.serialized() ?? "?")"
                + " mine \(conflict["mine"]?["version"]?.serialized() ?? "-")"
                + " server \(conflict["server"]?["version"]?.serialized() ?? "-")"
                + " base \(conflict["base"]?["version"]?.serialized() ?? "-")"
                + (conflict["message"]?.stringValue.map { ": \($0.prefix(300))" } ?? "")
            let letGo = choices.filter { $0.stringValue != "--keep-mine" }
            let offered = settling && keptWhileSettling.contains(id) && !letGo.isEmpty ? letGo : choices
            let choice = offered[Int(random.next() % UInt64(offered.count))].stringValue ?? ""
            if settling, choice == "--keep-mine" { keptWhileSettling.insert(id) }
            let result = try await run(["resolve", id, choice])
            events.record(.synced)  // the item is now the server's, or the merge of both
            let failed = result.status == 0 ? "" : " failed: \(result.output)\(result.error)"
            lastResolutions.append("\(id.prefix(8)) (\(conflict["status"]?.serialized() ?? "?")) \(choice)\(failed)")
            if result.status == 0 {
                resolutions[choice, default: 0] += 1
                if choice != "--keep-mine" { yielded.insert(id) }
            }
        }
    }
}

/// The SHA-256 of `bytes` as a file's name: 64 lowercase hex digits.
func sha256(_ bytes: some DataProtocol) -> String {
    SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
}
