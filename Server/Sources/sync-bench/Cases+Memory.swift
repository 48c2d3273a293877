import Foundation
import OfflineSync
import OfflineSyncEncryption
import TestSupport

extension Cases {
    /// `memory.pull` (`memory.pull.encrypted`): the peak resident memory of a separate client process that pulls N
    /// rows (into an encrypted store).
    func memoryPull(rows: Int, encrypted: Bool = false) async throws -> BenchResult {
        let serverPath = path("memory")
        try await BenchServer.seed(path: serverPath, rows: rows)
        let megabytes = try await BenchServer.run(path: serverPath) { server in
            let printed = try await Self.runChild(
                ["--memory-child", server.url.absoluteString, "--rows", String(rows), "--transport", transport]
                    + (encrypted ? ["--encrypted-child"] : []))
            guard let printed, let value = Double(printed) else { throw BenchError("the memory child failed") }
            return value
        }
        return BenchResult(
            name: encrypted ? "memory.pull.encrypted" : "memory.pull", ours: megabytes, reference: nil, unit: "MB",
            higherIsBetter: false, n: rows)
    }

    /// Runs this binary again with `arguments` and returns what it printed, trimmed; nil when it failed.
    static func runChild(_ arguments: [String]) async throws -> String? {
        let result = try await runCommand(CommandLine.arguments[0], arguments, timeout: .seconds(600))
        guard result.status == 0 else { return nil }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// In the child: pull every row into a fresh store, then print the peak RSS in MB.
    static func memoryChild(url: URL, rows: Int, transport: String, directory: URL, encrypted: Bool) async throws {
        let path = directory.appendingPathComponent("child-\(UUID().uuidString).sqlite").path
        let store =
            encrypted
            ? try SQLiteLocalStore.encrypted(path: path, key: try benchKey) : try SQLiteLocalStore(path: path)
        var configuration = SyncClient.Configuration()
        configuration.transport = Self.transport(named: transport)
        let client = SyncClient(url: url, store: store, configuration: configuration)
        let summary = try await client.syncTable("TodoItem", of: BenchItem.self).pull(queryID: "all")
        guard summary.appliedCount == rows else {
            throw BenchError("memory child pulled \(summary.appliedCount) of \(rows)")
        }
        print(String(format: "%.1f", megabytes("VmHWM")))
    }

    /// A memory figure of this process from /proc/self/status (Linux), in MB — `VmHWM` the peak resident
    /// memory, `VmRSS` the resident memory now; 0 where it is not available.
    static func megabytes(_ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("\(field):") }),
            let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }
}
