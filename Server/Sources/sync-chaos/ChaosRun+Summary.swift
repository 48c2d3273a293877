import Foundation
import SyncCore
import TestSupport

/// The report's lines of a run: what happened, in figures, and the result.
extension ChaosRun {
    /// The lines of what the devices, the proxy and the chaos agent did, and the result last.
    func summary(
        _ devices: [Device], rows: [JSONValue], proxy: FaultProxy, chaos: ChaosAgent, settling: Settling,
        seconds: (chaos: Double, all: Double), failures: Int
    ) -> [String] {
        func total(_ count: (Device) -> Int) -> Int { devices.map(count).reduce(0, +) }
        let (faults, sent, pagesAhead) = proxy.tally
        let faultText = FaultProxy.Fault.allCases.map { "\(faults[$0, default: 0]) \($0.rawValue)" }
        var opening =
            "seed \(seed): \(settings.devices) devices × \(settings.steps) steps speaking \(settings.protocols.rawValue)"
        if settings.perUser { opening += " (one user, per-user table)" }
        if settings.fields {
            opening +=
                " (one field each: \(total(\.completions.count)) done/not done, \(total(\.edits.count)) text edits, "
                + "\(Self.sharedRows(devices)) rows changed in both fields by different devices)"
        }
        if settings.shared {
            opening +=
                " (a user each, shared lists: \(total(\.shares)) shares, \(total(\.unshares)) unshares, "
                + "\(total(\.setsMade)) lists made as change sets, \(total(\.setsKilled)) killed mid-way)"
        }
        let resolutions = Self.merged(devices.map(\.resolutions)).sorted { $0.key < $1.key }
        return [
            opening + ", \(total(\.commands)) todo commands in \(total(\.todo.processesStarted)) processes, "
                + "\(total(\.syncs)) syncs",
            "  requests through the proxy: \(sent + faults.values.reduce(0, +)) (\(pagesAhead) pages asked ahead); "
                + "faults: " + faultText.joined(separator: ", "),
            "  kills: \(total(\.killedSyncs)) devices mid-sync, \(total(\.killedWrites)) mid-write, "
                + "\(chaos.serverKills) server (SIGKILL, restarted); \(chaos.partitions) partitions",
            "  conflicts shown and resolved: \(total(\.conflictsShown)) "
                + "(\(resolutions.map { "\($0.value) \($0.key)" }.joined(separator: ", ")))"
                + "; changes merged with other devices' edits by themselves: \(total(\.merges))",
            "  server rows: \(rows.count) (\(rows.filter { !$0.isDeleted }.count) live); "
                + "settled in \(settling.rounds) round(s); "
                + String(format: "%.1f s of chaos, %.1f s in all", seconds.chaos, seconds.all),
            "  result: " + (failures == 0 ? "PASS" : "FAIL (\(failures) problem(s))"),
        ]
    }

    /// The line of the change sets made and how pushes and pulls told of them, in a run by fields or of shared lists.
    func setLine(_ devices: [Device], watcher: SetWatcher?) -> String? {
        func total(_ count: (Device) -> Int) -> Int { devices.map(count).reduce(0, +) }
        guard settings.shared else {
            guard settings.fields else { return nil }
            return "  change sets: \(total(\.setsMade)) made (two items marked at once), \(total(\.setsKilled)) killed "
                + "mid-way; \(total(\.setsPushed)) applied whole, \(total(\.setsRefused)) refused whole, as completed "
                + "syncs told"
        }
        let watched = watcher.map { watcher in
            let (snapshots, violations) = watcher.findings
            return "\(snapshots) snapshots of the server's lists and owners checked; half-applied sets seen: "
                + "\(violations.count); "
        }
        return "  change sets: \(total(\.setsPushed)) applied whole, \(total(\.setsRefused)) refused whole, as "
            + "completed syncs told; " + (watched ?? "server not watched (PostgreSQL); ")
            + "\(total(\.listPullsNotApplied)) pulls of lists that kept changing (nothing applied); "
            + "\(total(\.listReadsChecked)) device reads of lists checked; half sets read: "
            + "\(total(\.halfSetsRead.count))"
    }
}
