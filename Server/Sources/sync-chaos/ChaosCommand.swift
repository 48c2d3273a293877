import ArgumentParser
import Foundation

/// `sync-chaos`: the chaos test of the whole story (see ``ChaosRun``), bounded in steps and time.
@main
struct ChaosCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-chaos",
        abstract: "Run devices (real todo processes) against a real sync-server through a fault-injecting proxy.",
        discussion: """
            Faults: requests dropped, replies lost after the server committed, 503s, replies cut short,
            network partitions; devices killed with SIGKILL mid-sync and mid-write; the server killed with
            SIGKILL and restarted on the same database. Then every device syncs until settled and the run
            checks: every device equals the server, nothing pending or waiting, no item twice, no
            acknowledged write lost. Exits 1 when a seed fails.
            """)

    @Option(help: "A seed (repeatable); each seed is one run.") var seed: [UInt64] = [1]
    @Option(help: "Devices stepping at once.") var devices = 3
    @Option(help: "Steps per device.") var steps = 30
    @Option(help: "Chance that a request through the proxy meets a fault.") var faultRate = 0.2
    @Option(help: "Seconds a seed may take in all (the chaos phase stops at 70% of it).") var timeLimit: Double = 240
    @Flag(help: "Serve TodoItem as a per-user table behind tokens (the devices are one user; another sees nothing).")
    var perUser = false
    @Flag(help: "Make each device a user of shared lists: it makes a list, shares it and stops sharing it at random.")
    var shared = false
    @Flag(help: "Attach files of 1–8 MB to items (some devices killed mid-attach or mid-upload); check every file.")
    var attachments = false
    @Flag(
        help:
            "Even-numbered devices edit only text, odd ones only done/not done, of the first six items: the edits must merge."
    )
    var fields = false
    @Flag(
        help: ArgumentHelp(
            "Serve with a 2-second tombstone retention; devices go away 3–5 s at random (after a write or two) while "
                + "others delete and edit: what was deleted must not come back.",
            discussion: "The report counts the spells away, the syncs that reconciled and the rows they removed."))
    var retention = false
    @Flag(help: "Encrypt each device's store with a key of its own (todo --key-file); check no file holds a text.")
    var encrypted = false
    @Flag(help: "Serve from a PostgreSQL of each seed's own (PostgreSQL's binaries needed) instead of SQLite.")
    var postgres = false
    @Option(
        name: .customLong("protocol"),
        help:
            "What the devices speak: v2, v3 (Datasync), or mixed (even-numbered devices v2, odd ones v3, on one table)."
    )
    var wireProtocol = ChaosRun.Protocols.v2
    @Option(help: "Milliseconds the proxy waits before forwarding each request (a link's round trip); default 0.")
    var latencyMs = 0
    @Option(help: "Where runs keep their files (default: a temporary folder, removed afterwards).")
    var directory: String?

    func validate() throws {
        guard [perUser, shared, attachments, fields, retention].filter({ $0 }).count <= 1 else {
            throw ValidationError("--per-user, --shared, --attachments, --fields and --retention are separate runs")
        }
        guard !(postgres && attachments) else {
            throw ValidationError("--attachments checks the files of the SQLite server's folder: not with --postgres")
        }
        guard devices >= 1, devices <= 32 else { throw ValidationError("--devices is 1 to 32") }
        guard steps >= 1, steps <= 10_000 else { throw ValidationError("--steps is 1 to 10000") }
        guard (0...1).contains(faultRate) else { throw ValidationError("--fault-rate is 0 to 1") }
        guard (0...1000).contains(latencyMs) else { throw ValidationError("--latency-ms is 0 to 1000") }
    }

    func run() async throws {
        Children.stopOnSignals()
        let binaries = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        let folder =
            directory.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("sync-chaos-\(UUID().uuidString)")
        var failed = 0
        // A temporary folder goes, unless a seed failed: its devices' histories and stores are what to read then.
        defer {
            if directory == nil, failed == 0 { try? FileManager.default.removeItem(at: folder) }
            if directory == nil, failed > 0 { say("sync-chaos: kept \(folder.path) for the failed seed(s)") }
        }
        let settings = ChaosRun.Settings(
            devices: devices, steps: steps, faultRate: faultRate, timeLimit: timeLimit,
            todo: binaries.appendingPathComponent("todo").path,
            server: binaries.appendingPathComponent("sync-server").path, directory: folder, perUser: perUser,
            shared: shared, attachments: attachments, fields: fields, retention: retention, encrypted: encrypted,
            protocols: wireProtocol, postgres: postgres, latencyMilliseconds: latencyMs)
        for seed in seed {
            let report = try await ChaosRun(seed: seed, settings: settings).run()
            report.lines.forEach(say)
            for failure in report.failures.prefix(20) { say("  problem: \(failure)") }
            if !report.passed { failed += 1 }
        }
        say("sync-chaos: \(seed.count - failed) of \(seed.count) seed(s) passed")
        if failed > 0 { throw ExitCode(1) }
    }
}

extension ChaosRun.Protocols: ExpressibleByArgument {}

/// Prints a line at once, also through a pipe (a long run shows each seed as it ends).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
