import ArgumentParser
import Foundation
import OfflineSync
import SyncCore

/// `sync-bench`: each path measured beside its physical reference in the same run, as a ratio.
@main
struct SyncBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-bench",
        abstract: "Measure OfflineSync against raw SQLite and HTTP references on this machine.")

    @Flag(help: "A small run (under a minute).")
    var quick = false

    @Option(help: "Also write the results as JSON to this file.")
    var json: String?

    @Option(
        help:
            "Run only this case (local.insert, input.cost (input.cost.json, .odata, .collation, .like, .compare), local.query, pull.initial, pull.initial.1m (not in --quick runs), pull.incremental, pull.noop, push.sequential, push.set10, server.page, server.page.gzip, server.page.large, server.page.large.gzip, server.write.hook, server.write.aftercommit, memory.pull, live.latency, live.subscribers, share.join, share.removal, attachments.upload, attachments.download, attachments.resume, attachments.memory, storage.churn (rows × 10 in and out), fairness; with --database: storage.churn.pg, fairness.pg, server.page.pg, pull.initial.pg, server.write.pg, server.write.peruser.pg, server.write.aftercommit.pg, server.page.shared.pg, server.write.shared.pg; with --link: push.batch, push.sequential, push.set10, pull.initial, pull.initial.plain, sync.firstrun, sync.catchup, attachments.upload, attachments.download)."
    )
    var only: String?

    @Option(
        help: """
            Also run server.page.pg, pull.initial.pg, server.write.pg and server.write.peruser.pg on this PostgreSQL database \
            (postgres://USER:PASS@HOST:PORT/DB; its TodoItem table is dropped and re-created).
            """)
    var database: String?

    @Option(help: "The clients' transport: urlsession or async-http-client.")
    var transport = "urlsession"

    @Option(
        name: .customLong("protocol"),
        help: "The dialect the clients speak: v2 (Azure Mobile Apps) or v3 (Datasync); the server speaks both.")
    var wireProtocol = "v2"

    @Option(help: .hidden) var memoryChild: String?
    @Flag(help: .hidden) var encryptedChild = false

    @Option(help: .hidden) var attachmentChild: String?

    @Option(help: .hidden) var followersChild: String?

    @Option(help: .hidden) var followers = 1000

    @Option(help: "Rows for the pull cases (default 100000; 20000 with --quick).")
    var rows: Int?

    @Option(
        help: """
            Instead of the loopback cases, run the link cases (push.batch, push.sequential, push.set10, pull.initial, \
            pull.initial.plain, sync.firstrun, sync.catchup, attachments.upload, attachments.download) through a \
            proxy that simulates a link: lan (no shaping), 4g (60 ms RTT, 20 Mbit/s down, 5 up) or 3g (150 ms RTT, \
            2 down, 0.5 up).
            """)
    var link: String?

    @Option(help: "Repetitions of each case; the median is reported.")
    var repetitions = 3

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let rows = self.rows ?? (quick ? 20_000 : 100_000)
        if let memoryChild, let url = URL(string: memoryChild) {
            return try await Cases.memoryChild(
                url: url, rows: rows, transport: transport, directory: directory, encrypted: encryptedChild)
        }
        if let attachmentChild, let url = URL(string: attachmentChild) {
            return try await Cases.attachmentChild(url: url, size: rows, transport: transport, directory: directory)
        }
        if let followersChild, let url = URL(string: followersChild) {
            return try await Cases.followersChild(url: url, count: followers)
        }
        guard ["urlsession", "async-http-client"].contains(transport) else {
            throw ValidationError("--transport is urlsession or async-http-client")
        }
        let profile = try link.map { name in
            guard let profile = LinkProfile.all.first(where: { $0.name == name }) else {
                throw ValidationError("--link is one of \(LinkProfile.all.map(\.name).joined(separator: ", "))")
            }
            return profile
        }
        let dialect: SyncClient.ProtocolVersion
        switch wireProtocol {
        case "v2": dialect = .v2
        case "v3": dialect = .v3
        default: throw ValidationError("--protocol is v2 or v3")
        }
        let cases = Cases(
            directory: directory, repetitions: max(repetitions, 1), quick: quick, transport: transport,
            dialect: dialect)
        let results: [BenchResult]
        if let profile {
            results = try await linkCases(profile, cases, rows: rows)
        } else {
            results = try await localCases(cases, rows: rows)
        }
        print(Self.table(results))
        if let json {
            let machine: JSONValue = [
                "cores": .int(Int64(ProcessInfo.processInfo.activeProcessorCount)),
                "memoryGB": .double(
                    (Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824 * 10).rounded() / 10),
            ]
            let document: JSONValue = ["machine": machine, "cases": .array(results.map(\.json))]
            try document.serializedData().write(to: URL(fileURLWithPath: json))
        }
    }

    /// Whether the run asks for a case of these names (every case when `--only` is not given).
    private func wanted(_ names: String...) -> Bool { only.map { names.contains($0) } ?? true }

    /// The cases over a simulated link (`--link`).
    private func linkCases(_ profile: LinkProfile, _ cases: Cases, rows: Int) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        if wanted("push.batch") { results.append(try await cases.linkPush(profile, batched: true)) }
        if wanted("push.sequential") { results.append(try await cases.linkPush(profile, batched: false)) }
        if wanted("push.set10") { results.append(try await cases.pushSet(profile)) }
        if wanted("pull.initial") {
            results.append(try await cases.linkPull(profile, rows: rows, compressing: true))
        }
        if wanted("pull.initial.plain") {
            results.append(try await cases.linkPull(profile, rows: rows, compressing: false))
        }
        if wanted("sync.firstrun") { results.append(try await cases.linkFirstRun(profile, rows: rows)) }
        if wanted("sync.catchup") { results.append(try await cases.linkCatchUp(profile, rows: rows)) }
        if wanted("attachments.upload", "attachments.download") {
            results += try await cases.attachmentTransfers(link: profile).filter {
                only == nil || $0.name.hasPrefix(only! + "@")
            }
        }
        return results
    }

    /// The cases on loopback, on the store, and on the server alone (and on PostgreSQL with `--database`).
    private func localCases(_ cases: Cases, rows: Int) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        if wanted("local.insert") { results.append(try await cases.localInsert()) }
        if wanted("input.cost") { results += try cases.inputCost() }
        if wanted("pull.initial", "pull.noop", "pull.incremental", "local.query") {
            results += try await cases.pulls(rows: rows).filter { wanted($0.name) }
        }
        if only == "pull.initial.1m" || (only == nil && !quick) {
            results.append(try await cases.pullInitialMillion())
        }
        if wanted("push.sequential") { results.append(try await cases.pushSequential()) }
        if wanted("push.set10") { results.append(try await cases.pushSet(nil)) }
        if wanted("server.page") { results.append(try await cases.serverPage(rows: rows)) }
        if wanted("server.page.gzip") { results.append(try await cases.serverPage(rows: rows, compressing: true)) }
        if wanted("server.page.large") { results.append(try await cases.serverPageLarge(gzip: false)) }
        if wanted("server.page.large.gzip") { results.append(try await cases.serverPageLarge(gzip: true)) }
        if wanted("server.write.hook") { results.append(try await cases.serverWriteHook()) }
        if wanted("server.write.aftercommit") {
            results.append(
                try await cases.serverWriteHook("server.write.aftercommit", hooks: Cases.afterCommitHooks))
        }
        if wanted("local.insert.encrypted", "local.query.encrypted", "pull.initial.encrypted") {
            results += try await cases.encryptedTwins(rows: rows).filter { wanted($0.name) }
        }
        if wanted("memory.pull") { results.append(try await cases.memoryPull(rows: rows)) }
        if wanted("memory.pull.encrypted") {
            results.append(try await cases.memoryPull(rows: rows, encrypted: true))
        }
        results += try await cases.sharing(rows: rows) { only == nil || only == $0 }
        if wanted("live.latency") { results += try await cases.liveLatency() }
        if wanted("live.subscribers") { results += try await cases.liveSubscribers() }
        if wanted("attachments.upload", "attachments.download") {
            results += try await cases.attachmentTransfers().filter { wanted($0.name) }
        }
        if wanted("attachments.resume") { results.append(try await cases.attachmentResume()) }
        if wanted("attachments.memory") { results += try await cases.attachmentMemory() }
        if wanted("storage.churn") { results += try await cases.storageChurn(rows: rows * 10) }
        if wanted("fairness") { results += try await cases.fairness() }
        if let database, wanted("fairness.pg") { results += try await cases.fairness(database: database) }
        if let database {
            results += try await cases.postgres(url: database, rows: rows) { only == nil || only == $0 }
            results += try await cases.sharingPostgres(url: database, rows: rows) { only == nil || only == $0 }
        }
        return results
    }

    static func table(_ results: [BenchResult]) -> String {
        func format(_ value: Double?) -> String {
            guard let value else { return "—" }
            return value >= 100 ? String(Int(value.rounded())) : String(format: "%.3f", value)
        }
        let width = max(16, results.map(\.name.count).max() ?? 0)
        var lines = [
            "name".padding(toLength: width, withPad: " ", startingAt: 0) + "ours".leftPadded(14)
                + "reference".leftPadded(14)
                + "ratio".leftPadded(8) + "  unit (n)"
        ]
        for result in results {
            lines.append(
                result.name.padding(toLength: width, withPad: " ", startingAt: 0) + format(result.ours).leftPadded(14)
                    + format(result.reference).leftPadded(14)
                    + (result.ratio.map { String(format: "%.2f", $0) } ?? "—").leftPadded(8)
                    + "  \(result.unit) (n=\(result.n))")
        }
        return lines.joined(separator: "\n")
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
