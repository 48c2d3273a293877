import Foundation
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import TestSupport

/// The steps of one run (``ChaosRun/run()``): the devices made, their chaos beside the chaos agent's, the settling, the
/// checks, and the report's lines.
extension ChaosRun {
    /// How the devices settled after the chaos: rounds of syncs until one in which no device changed anything.
    struct Settling {
        var rounds = 0
        var settled = false
        /// Per round: what the devices that changed something said.
        var unsettled: [[String]] = []
    }

    /// The run's chaos, settling and checks, against `server` behind `proxy`.
    func run(
        in directory: URL, server: ChaosServer, proxy: FaultProxy, users: [String?], stranger: String?
    ) async throws -> Report {
        let started = Date()
        let devices = try await makeDevices(in: directory, proxy: proxy, users: users)
        // Shared runs: half-applied change sets (a list and its owner) on the server, while everything happens.
        let atomicUsers = Set(devices.filter { settings.protocols.of(device: $0.index) == "v2" }.compactMap(\.user))
        for device in devices { device.atomicUsers = atomicUsers }
        let watcher =
            settings.shared && !settings.postgres
            ? SetWatcher(database: directory.appendingPathComponent("server.sqlite").path, atomicUsers: atomicUsers)
            : nil
        let watching = watcher.map { watcher in Task { await watcher.run() } }
        let chaos = ChaosAgent(server: server, proxy: proxy, seed: seed ^ 0xC4A05)
        let errors = await step(devices, until: started.addingTimeInterval(settings.timeLimit * 0.7), beside: chaos)
        proxy.setPartitioned(false)
        let chaosSeconds = Date().timeIntervalSince(started)
        // Heal, then every device syncs until a whole round changes nothing.
        proxy.heal()
        try await server.ensureRunning()
        let settling = try await settle(devices)
        watching?.cancel()
        await watching?.value

        var report = Report(seed: seed)
        report.failures += errors
        if let watcher {
            report.failures += watcher.findings.violations.prefix(5).map { "half-applied change set: \($0)" }
        }
        if !settling.settled {
            let said = settling.unsettled.enumerated().map { "\n    round \($0 + 1): " + $1.joined(separator: "; ") }
            report.failures.append("devices did not settle in \(settling.rounds) rounds:" + said.joined())
        }
        let rows = try await server.rows()
        let checked = try await check(
            rows: rows, devices: devices, server: server, users: users, directory: directory, report: &report)
        if let stranger, case let seen = try await server.rows(token: stranger), !seen.isEmpty {
            report.failures.append("another user sees \(seen.count) of this user's rows")
        }
        report.lines = summary(
            devices, rows: rows, proxy: proxy, chaos: chaos, settling: settling,
            seconds: (chaosSeconds, Date().timeIntervalSince(started)), failures: report.failures.count)
        for line in checked + [setLine(devices, watcher: watcher)].compactMap({ $0 }) {
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

    /// The devices, each with its store in `directory` (and its key, its files' folder, its field or its user, as the
    /// run's settings say), talking to the proxy.
    private func makeDevices(in directory: URL, proxy: FaultProxy, users: [String?]) async throws -> [Device] {
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
                let files = directory.appendingPathComponent("files-\(device.index)")
                device.files = files
                try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            }
        }
        if settings.retention { for device in devices { device.goesAway = true } }
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
        return devices
    }

    /// Chaos: the devices step at once, each until its steps are done or `deadline`, while `chaos` partitions the
    /// network and kills the server.
    ///
    /// - Returns: The errors that stopped a device's steps.
    private func step(_ devices: [Device], until deadline: Date, beside chaos: ChaosAgent) async -> [String] {
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
        return errors.withLock { $0 }
    }

    /// Every device syncs, round after round (at most 12), until a round in which none sent or received anything.
    private func settle(_ devices: [Device]) async throws -> Settling {
        var settling = Settling()
        while !settling.settled, settling.rounds < 12 {
            settling.rounds += 1
            var round: [String] = []
            for device in devices {
                let result = try await device.sync(killAfter: nil, settling: true)
                if result.status != 0 || !result.output.contains("sent 0 change(s), received 0 item(s)") {
                    let said = (result.output + result.error).split(separator: "\n").joined(separator: " / ")
                    round.append(
                        "\(device.name): \(said) [resolved: \(device.lastResolutions.joined(separator: ", "))]")
                }
            }
            settling.unsettled.append(round)
            settling.settled = round.isEmpty
        }
        return settling
    }

    /// The checks of the end state, as the run's settings ask, their failures added to `report`.
    ///
    /// - Returns: The report's lines of what was checked (files, encrypted stores, consistency).
    private func check(
        rows: [JSONValue], devices: [Device], server: ChaosServer, users: [String?], directory: URL,
        report: inout Report
    ) async throws -> [String] {
        for device in devices {
            report.failures += device.halfSetsRead.prefix(5).map { "\(device.name) read half a change set: \($0)" }
        }
        report.failures += devices.flatMap(\.failures)
        if settings.shared {
            report.failures += try await Self.checkShared(
                server: server, devices: devices, tokens: users.compactMap { $0 })
        } else {
            report.failures += try await Self.check(rows: rows, devices: devices)
        }
        if settings.fields { report.failures += Self.checkFields(rows: rows, devices: devices) }
        var lines: [String] = []
        if settings.retention {
            let (problems, line) = Self.checkDeletesStay(rows: rows, devices: devices)
            report.failures += problems
            lines.append(line)
        }
        if settings.attachments {
            let (problems, line) = try await Self.checkAttachments(
                server: server, rows: rows, devices: devices,
                folder: directory.appendingPathComponent("server.sqlite.attachments/files"))
            report.failures += problems
            lines.append(line)
        }
        if settings.encrypted {
            let (problems, line) = Self.checkEncrypted(directory: directory, devices: settings.devices, rows: rows)
            report.failures += problems
            lines.append(line)
        }
        // The guarantees a device's own history shows (docs/consistency.md).
        var (ownWrites, monotonic) = (0, 0)
        for device in devices {
            let unseen = device.events.readYourWrites()
            let stale = device.events.monotonicReads()
            (ownWrites, monotonic) = (ownWrites + unseen.count, monotonic + stale.count)
            report.failures += unseen.prefix(5).map { "\(device.name): read your writes: \($0)" }
            report.failures += stale.prefix(5).map { "\(device.name): monotonic reads: \($0)" }
        }
        let counts = devices.map(\.events.counts)
        lines.append(
            "  consistency: \(counts.map(\.reads).reduce(0, +)) reads and \(counts.map(\.writes).reduce(0, +)) "
                + "acknowledged writes checked; violations: read your writes \(ownWrites), monotonic reads \(monotonic)"
        )
        return lines
    }
}
