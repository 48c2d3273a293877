import Foundation
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import TestSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One seeded chaos run: a real `sync-server` over SQLite behind a ``FaultProxy``, several devices
/// stepping at once through real `todo` processes (some killed with SIGKILL mid-sync or mid-write),
/// a chaos task partitioning the network and killing the server with SIGKILL (restarted on the same
/// database); then healing, syncing every device until settled (resolving what `todo conflicts`
/// shows), and checking the outcome.
struct ChaosRun {
    struct Settings {
        var devices: Int
        var steps: Int
        var faultRate: Double
        var timeLimit: TimeInterval
        var todo: String
        var server: String
        var directory: URL
        /// Whether `TodoItem` is a per-user table behind tokens: the devices are one user's, and a second
        /// user must see none of the rows.
        var perUser = false
        /// Whether the devices are users of shared lists (docs/examples/shared-lists.json): each makes a list of its
        /// own, shares it with others and stops sharing it; each must end with its user's scope exactly.
        var shared = false
        /// Whether the devices attach files of 1–8 MB to items (docs/examples/attachments.json), some killed
        /// mid-attach or mid-upload; each file must end on the server and on every device that opens it, byte-exact.
        var attachments = false
        /// Whether devices edit one field each of the first six items (even-numbered devices the text, odd ones
        /// `complete`): edits of different fields must merge by themselves (issue 47) — no conflict, and each
        /// survives.
        var fields = false
        /// Whether each device's store is encrypted (docs/encryption.md, issue 48), with a key of its own: after the
        /// run, no store file holds SQLite's header or a text of the server's rows.
        var encrypted = false
        /// What the devices speak.
        var protocols = Protocols.v2
        /// Whether the server runs on a PostgreSQL of the run's own (a throwaway cluster per seed) instead of SQLite:
        /// the server-side set watcher, which reads the SQLite file, does not run then.
        var postgres = false
        /// The wait the proxy adds to each request it forwards, in milliseconds.
        var latencyMilliseconds = 0
    }

    /// The dialects the devices speak (`TODO_PROTOCOL`).
    enum Protocols: String, CaseIterable, Sendable {
        case v2, v3
        /// Even-numbered devices v2, odd ones v3: both dialects write one table.
        case mixed

        /// The protocol of device `index`.
        func of(device index: Int) -> String {
            switch self {
            case .v2, .v3: rawValue
            case .mixed: index % 2 == 0 ? "v2" : "v3"
            }
        }
    }

    struct Report {
        var seed: UInt64
        var lines: [String] = []
        var failures: [String] = []
        var passed: Bool { failures.isEmpty }
    }

    let seed: UInt64
    let settings: Settings

    func run() async throws -> Report {
        guard settings.postgres else {
            return try await run(
                database: "sqlite:"
                    + settings.directory.appendingPathComponent("seed-\(seed)")
                    .appendingPathComponent("server.sqlite").path)
        }
        return try await withLocalPostgres { postgres in
            try await postgres.start()
            return try await run(database: postgres.url)
        }
    }

    /// The run against a server on `database`.
    private func run(database: String) async throws -> Report {
        let directory = settings.directory.appendingPathComponent("seed-\(seed)")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var options: [String] = []
        var token: String?
        var stranger: String?
        if settings.perUser {
            let secret = "sync-chaos-secret-0123456789abcdef-\(seed)"
            let config = directory.appendingPathComponent("server.json")
            try #"{"auth": {"hs256Secret": "\#(secret)"}, "tables": [{"name": "TodoItem", "perUser": true}]}"#
                .write(to: config, atomically: true, encoding: .utf8)
            options = ["--config", config.path]
            token = try await Self.token(settings.server, subject: "chaos-user", secret: secret)
            stranger = try await Self.token(settings.server, subject: "stranger", secret: secret)
        }
        var users: [String?] = Array(repeating: token, count: settings.devices)
        if settings.shared {
            let secret = "sync-chaos-secret-0123456789abcdef-\(seed)"
            let config = directory.appendingPathComponent("server.json")
            try Self.sharedConfiguration(secret: secret).write(to: config, atomically: true, encoding: .utf8)
            options = ["--config", config.path]
            users = []
            for index in 0..<settings.devices {
                users.append(try await Self.token(settings.server, subject: "user-\(index)", secret: secret))
            }
            token = users[0]
        }
        if settings.attachments {
            let config = directory.appendingPathComponent("server.json")
            try #"{"tables": [{"name": "TodoItem", "attachments": ["file"]}]}"#
                .write(to: config, atomically: true, encoding: .utf8)
            options = ["--config", config.path, "--max-attachment-size", "16000000"]
        }
        let server = ChaosServer(
            executable: settings.server, port: try freePort(),
            database: database, options: options,
            token: token)
        try await server.start()
        let proxy: FaultProxy
        do {
            proxy = try await FaultProxy(
                upstreamPort: server.port,
                faults: .init(
                    seed: seed, rate: settings.faultRate, latency: .milliseconds(max(0, settings.latencyMilliseconds))))
        } catch {
            await server.stop()
            throw error
        }
        do {
            let report = try await run(in: directory, server: server, proxy: proxy, users: users, stranger: stranger)
            await proxy.stop()
            await server.stop()
            return report
        } catch {
            await proxy.stop()
            await server.stop()
            throw error
        }
    }

    /// A run by fields opens with one merge that timing cannot take away: device 1 marks an item of device 0 done
    /// while device 0 edits its text, both offline; device 1 syncs first, so device 0's edit meets the newer row and
    /// must merge by itself. Under load the random steps alone met no such edits in some runs (CI: seed 13, 0 merges).
    /// Faults are paused meanwhile; the seeded chaos comes after.
    private static func meetOnOneItem(_ devices: [Device], proxy: FaultProxy, faultRate: Double) async throws {
        guard devices.count >= 2 else { return }
        let (text, completion) = (devices[0], devices[1])
        proxy.setFaultRate(0)
        defer { proxy.setFaultRate(faultRate) }
        try await text.add(killAfter: nil)
        try await text.sync(killAfter: nil)
        try await completion.sync(killAfter: nil)
        // The only item each holds, so both edit it.
        try await completion.edit(killAfter: nil)
        try await text.edit(killAfter: nil)
        try await completion.sync(killAfter: nil)
        let merged = text.merges
        try await text.sync(killAfter: nil)
        guard text.merges > merged else {
            throw ChaosError("the opening's edits of two fields of one item did not merge by themselves")
        }
    }

    /// The run's chaos, settling and checks, against `server` behind `proxy`.
    private func run(
        in directory: URL, server: ChaosServer, proxy: FaultProxy, users: [String?], stranger: String?
    ) async throws -> Report {
        let started = Date()
        var keyFiles: [String?] = Array(repeating: nil, count: settings.devices)
        if settings.encrypted {
            var random = SplitMix64(seed: seed &* 7_919)
            for index in keyFiles.indices {
                let file = directory.appendingPathComponent("device-\(index).key")
                let hex = (0..<32).map { _ in String(format: "%02x", UInt8(truncatingIfNeeded: random.next())) }
                try hex.joined().write(to: file, atomically: true, encoding: .utf8)
                keyFiles[index] = file.path
            }
        }
        let devices = (0..<settings.devices).map { index in
            Device(
                index: index, todo: settings.todo,
                store: directory.appendingPathComponent("device-\(index).sqlite").path,
                url: "http://127.0.0.1:\(proxy.port)", seed: seed &* 1_000_003 &+ UInt64(index), token: users[index],
                protocol: settings.protocols.of(device: index), keyFile: keyFiles[index])
        }
        if settings.attachments {
            for device in devices {
                device.files = directory.appendingPathComponent("files-\(device.index)")
                try FileManager.default.createDirectory(at: device.files!, withIntermediateDirectories: true)
            }
        }
        if settings.fields {
            for device in devices { (device.byFields, device.editsCompletion) = (true, device.index % 2 == 1) }
            try await Self.meetOnOneItem(devices, proxy: proxy, faultRate: settings.faultRate)
        }
        if settings.shared {
            for device in devices {
                device.user = "user-\(device.index)"
                device.others = (0..<settings.devices).filter { $0 != device.index }.map { "user-\($0)" }
                try await device.makeList()
            }
        }
        let deadline = started.addingTimeInterval(settings.timeLimit * 0.7)
        // Shared runs: half-applied change sets (a list and its owner) on the server, while everything happens.
        let atomicUsers = Set(devices.filter { settings.protocols.of(device: $0.index) == "v2" }.compactMap(\.user))
        for device in devices { device.atomicUsers = atomicUsers }
        let watcher =
            settings.shared && !settings.postgres
            ? SetWatcher(database: directory.appendingPathComponent("server.sqlite").path, atomicUsers: atomicUsers)
            : nil
        let watching = watcher.map { watcher in Task { await watcher.run() } }

        // Chaos: devices step concurrently while partitions and server kills happen.
        let chaos = ChaosAgent(server: server, proxy: proxy, seed: seed ^ 0xC4A05)
        let errors = Locked<[String]>([])
        let steps = settings.steps
        await withTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask {
                    do {
                        for _ in 0..<steps where Date() < deadline { try await device.step() }
                    } catch {
                        errors.withLock { $0.append("\(device.name): \(error)") }
                    }
                }
            }
            let running = Task { await chaos.run() }
            await group.waitForAll()
            running.cancel()
            await running.value
        }
        proxy.setPartitioned(false)
        let chaosSeconds = Date().timeIntervalSince(started)

        // Heal, then every device syncs until a whole round changes nothing.
        proxy.heal()
        try await server.ensureRunning()
        var rounds = 0
        var settled = false
        var unsettled: [[String]] = []  // per round: what the devices that changed something said
        while !settled, rounds < 12 {
            rounds += 1
            var round: [String] = []
            for device in devices {
                let result = try await device.sync(killAfter: nil, settling: true)
                if result.status != 0 || !result.output.contains("sent 0 change(s), received 0 item(s)") {
                    let said = (result.output + result.error).split(separator: "\n").joined(separator: " / ")
                    round.append(
                        "\(device.name): \(said) [resolved: \(device.lastResolutions.joined(separator: ", "))]")
                }
            }
            unsettled.append(round)
            settled = round.isEmpty
        }

        watching?.cancel()
        await watching?.value
        var report = Report(seed: seed)
        report.failures += errors.withLock { $0 }
        if let watcher {
            report.failures += watcher.findings.violations.prefix(5).map { "half-applied change set: \($0)" }
        }
        for device in devices {
            report.failures += device.halfSetsRead.prefix(5).map { "\(device.name) read half a change set: \($0)" }
        }
        report.failures += devices.flatMap(\.failures)
        if !settled {
            let said = unsettled.enumerated().map { "\n    round \($0 + 1): " + $1.joined(separator: "; ") }
            report.failures.append("devices did not settle in \(rounds) rounds:" + said.joined())
        }
        let rows = try await server.rows()
        if settings.shared {
            report.failures += try await Self.checkShared(
                server: server, devices: devices, tokens: users.compactMap { $0 })
        } else {
            report.failures += try await Self.check(rows: rows, devices: devices)
        }
        if settings.fields { report.failures += Self.checkFields(rows: rows, devices: devices) }
        var fileLine: String?
        if settings.attachments {
            let (problems, line) = try await Self.checkAttachments(
                server: server, rows: rows, devices: devices,
                folder: directory.appendingPathComponent("server.sqlite.attachments/files"))
            report.failures += problems
            fileLine = line
        }
        // The guarantees a device's own history shows (docs/consistency.md).
        var ownWrites = 0
        var monotonic = 0
        for device in devices {
            let unseen = device.events.readYourWrites()
            let stale = device.events.monotonicReads()
            (ownWrites, monotonic) = (ownWrites + unseen.count, monotonic + stale.count)
            report.failures += unseen.prefix(5).map { "\(device.name): read your writes: \($0)" }
            report.failures += stale.prefix(5).map { "\(device.name): monotonic reads: \($0)" }
        }
        let counts = devices.map(\.events.counts)
        let consistencyLine =
            "  consistency: \(counts.map(\.reads).reduce(0, +)) reads and \(counts.map(\.writes).reduce(0, +)) "
            + "acknowledged writes checked; violations: read your writes \(ownWrites), monotonic reads \(monotonic)"
        var encryptionLine: String?
        if settings.encrypted {
            let (problems, line) = Self.checkEncrypted(directory: directory, devices: settings.devices, rows: rows)
            report.failures += problems
            encryptionLine = line
        }
        if let stranger, case let seen = try await server.rows(token: stranger), !seen.isEmpty {
            report.failures.append("another user sees \(seen.count) of this user's rows")
        }

        let (faults, passed, pagesAhead) = proxy.tally
        let faultText = FaultProxy.Fault.allCases.map { "\(faults[$0, default: 0]) \($0.rawValue)" }
        report.lines = [
            "seed \(seed): \(settings.devices) devices × \(settings.steps) steps speaking \(settings.protocols.rawValue)"
                + "\(settings.perUser ? " (one user, per-user table)" : "")"
                + "\(settings.fields ? " (one field each: \(devices.map(\.completions.count).reduce(0, +)) done/not done, \(devices.map(\.edits.count).reduce(0, +)) text edits, \(Self.sharedRows(devices)) rows changed in both fields by different devices)" : "")"
                + "\(settings.shared ? " (a user each, shared lists: \(devices.map(\.shares).reduce(0, +)) shares, \(devices.map(\.unshares).reduce(0, +)) unshares, \(devices.map(\.setsMade).reduce(0, +)) lists made as change sets, \(devices.map(\.setsKilled).reduce(0, +)) killed mid-way)" : ""), "
                + "\(devices.map(\.commands).reduce(0, +)) todo commands in "
                + "\(devices.map(\.todo.processesStarted).reduce(0, +)) processes, \(devices.map(\.syncs).reduce(0, +)) syncs",
            "  requests through the proxy: \(passed + faults.values.reduce(0, +)) (\(pagesAhead) pages asked ahead); faults: "
                + faultText.joined(separator: ", "),
            "  kills: \(devices.map(\.killedSyncs).reduce(0, +)) devices mid-sync, "
                + "\(devices.map(\.killedWrites).reduce(0, +)) mid-write, \(chaos.serverKills) server (SIGKILL, restarted); "
                + "\(chaos.partitions) partitions",
            "  conflicts shown and resolved: \(devices.map(\.conflictsShown).reduce(0, +)) "
                + "(\(Self.merged(devices.map(\.resolutions)).sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")))"
                + "; changes merged with other devices' edits by themselves: \(devices.map(\.merges).reduce(0, +))",
            "  server rows: \(rows.count) (\(rows.filter { !$0.isDeleted }.count) live); settled in \(rounds) round(s); "
                + String(format: "%.1f s of chaos, %.1f s in all", chaosSeconds, Date().timeIntervalSince(started)),
            "  result: " + (report.failures.isEmpty ? "PASS" : "FAIL (\(report.failures.count) problem(s))"),
        ]
        var setLine: String?
        if settings.fields {
            setLine =
                "  change sets: \(devices.map(\.setsMade).reduce(0, +)) made (two items marked at once), "
                + "\(devices.map(\.setsKilled).reduce(0, +)) killed mid-way; \(devices.map(\.setsPushed).reduce(0, +)) "
                + "applied whole, \(devices.map(\.setsRefused).reduce(0, +)) refused whole, as completed syncs told"
        }
        if settings.shared {
            let watched = watcher.map { watcher in
                let (snapshots, violations) = watcher.findings
                return "\(snapshots) snapshots of the server's lists and owners checked; half-applied sets seen: "
                    + "\(violations.count); "
            }
            setLine =
                "  change sets: \(devices.map(\.setsPushed).reduce(0, +)) applied whole, "
                + "\(devices.map(\.setsRefused).reduce(0, +)) refused whole, as completed syncs told; "
                + (watched ?? "server not watched (PostgreSQL); ")
                + "\(devices.map(\.listPullsNotApplied).reduce(0, +)) pulls of lists that kept changing (nothing applied); "
                + "\(devices.map(\.listReadsChecked).reduce(0, +)) device reads of lists checked; half sets read: "
                + "\(devices.map(\.halfSetsRead.count).reduce(0, +))"
        }
        for line in [fileLine, encryptionLine, consistencyLine, setLine].compactMap({ $0 }) {
            report.lines.insert(line, at: report.lines.count - 1)
        }
        if !report.passed {
            for device in devices {
                let file = directory.appendingPathComponent("device-\(device.index).history")
                try? device.history.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
            }
            report.lines.append("  each device's commands: \(directory.path)/device-N.history")
        }
        for device in devices { await device.todo.close() }
        return report
    }

    /// The server's configuration of a shared run: docs/examples/shared-lists.json with the run's secret.
    static func sharedConfiguration(secret: String) -> String {
        #"""
        {"auth": {"hs256Secret": "\#(secret)"}, "tables": [
          {"name": "ListMember", "columns": {"listId": "string", "userId": "string", "role": "string"},
           "members": {"group": "listId", "user": "userId", "role": "role"}},
          {"name": "TodoList", "columns": {"name": "string"}, "membershipScope": {"column": "id", "members": "ListMember"}},
          {"name": "TodoItem", "columns": {"text": "string", "complete": "bool", "listId": "string"},
           "membershipScope": {"column": "listId", "members": "ListMember"}}]}
        """#
    }
}

/// Partitions the network and kills the server at seeded random moments until cancelled.
final class ChaosAgent: @unchecked Sendable {  // @unchecked: counters read after `run()` returned.
    let server: ChaosServer
    let proxy: FaultProxy
    private var random: SplitMix64
    private(set) var serverKills = 0
    private(set) var partitions = 0
    private(set) var failure: String?

    init(server: ChaosServer, proxy: FaultProxy, seed: UInt64) {
        self.server = server
        self.proxy = proxy
        random = SplitMix64(seed: seed)
    }

    /// The chaos, until the task is cancelled (a partition in progress is ended then).
    func run() async {
        while await pause(milliseconds: 1_500 + Int(random.next() % 2_500)) {
            if random.nextDouble() < 0.55 {
                partitions += 1
                proxy.setPartitioned(true)
                _ = await pause(milliseconds: 300 + Int(random.next() % 1_200))
                proxy.setPartitioned(false)
            } else {
                serverKills += 1
                await server.killAbruptly()
                _ = await pause(milliseconds: 200 + Int(random.next() % 800))
                do { try await server.start() } catch { failure = "\(error)" }
            }
        }
    }

    /// Sleeps; false when the run finished meanwhile.
    private func pause(milliseconds: Int) async -> Bool {
        (try? await Task.sleep(for: .milliseconds(milliseconds))) != nil
    }
}

extension ChaosRun {
    /// A development token from `sync-server token`.
    static func token(_ server: String, subject: String, secret: String) async throws -> String {
        let result = try await runChild(
            server, ["token", "--sub", subject, "--secret", secret, "--ttl", "86400"], environment: [:])
        guard result.status == 0 else { throw ChaosError("sync-server token failed: \(result.error)") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
