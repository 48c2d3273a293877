import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The chaos test (`sync-chaos`, see README "Chaos"): with fixed seeds, 4 devices (real `todo`
/// processes) and a real `sync-server` behind a fault-injecting proxy. It covers every fault kind —
/// requests dropped, replies lost after the server committed, 503s, replies cut short, partitions —
/// devices killed with SIGKILL mid-sync and mid-write, and the server killed with SIGKILL and
/// restarted on its database; then it checks every device equals the server, nothing is left
/// pending or waiting, no item is on the server twice, no acknowledged write was lost, and no item
/// that only one device wrote met a conflict (and, with `--attachments`, that every file arrived whole). The seeds
/// are ones that bite: with the defects of
/// issue 12 put back, seed 1 finds an edit lost behind a lost insert reply (point 4) and seed 6 a
/// device left with a stale row after taking the server's version (point 2). Each case runs with the devices
/// speaking v2, and again with them speaking v3 (Datasync) or both on one table (`--protocol mixed`: even-numbered
/// devices v2, odd ones v3), against the one server that serves both. Its monotonic-read check failed now and then in
/// whole-suite runs (3 of 9 over two stops, seed 1): a deleted item read again, unstamped, after a conflict of an edit
/// made before the delete was kept as mine (`MergeTests.keepingMineOfAnEditTheDeviceDeletedSince…`).
///
/// The runs are two suites, `ChaosTests` (every dialect under faults, kills and restarts; one user's devices) and
/// `ChaosModeTests` (pages, attachments, edits by fields, encrypted stores, shared lists). Each run is its own
/// processes and shares nothing with another, so their cases run side by side like any test's: the README's test
/// command holds the whole suite to 6 cases at once. (Serialized, each suite was a chain whose next case queued
/// behind every other test of the suite, and the chains ended the run 100 s after everything else.)
@Suite(.timeLimit(.minutes(3))) struct ChaosTests {
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "v3", "mixed"])
    func devicesUnderFaultsKillsAndRestartsConvergeWithNothingLost(protocol: String) async throws {
        let output = try await runChaos(
            [
                "--seed", "1", "--seed", "6", "--devices", "4", "--steps", "60", "--time-limit", "150",
                "--protocol", `protocol`,
            ])
        // Every kind of fault happened (the run would prove less otherwise).
        for kind in ["request dropped", "503 answered", "reply lost after commit", "reply cut short"] {
            #expect(!output.contains("; 0 \(kind)") && !output.contains(" 0 \(kind),"), "no \(kind)")
        }
        #expect(!output.contains(" 0 devices mid-sync"))
        // Every seed killed writes mid-way (the delay follows the device's own writes: a fixed one, tuned to a debug
        // `todo`, killed none in seed 6 with a release-built one).
        #expect(!output.contains(", 0 mid-write"), "a seed killed no write mid-way")
        // The chaos task kills the server on a clock, not per step, so a seed whose devices finish early may
        // meet none (seed 6 did in a clean-clone run); the run as a whole must.
        let seedsWithoutServerKill = output.components(separatedBy: " 0 server (SIGKILL").count - 1
        #expect(seedsWithoutServerKill < 2, "the server was never killed")
        // The consistency checks (docs/consistency.md) ran over the devices' histories, and found nothing.
        let checked = output.split(separator: "\n").filter { $0.contains("  consistency: ") }
        #expect(checked.count == 2 && checked.allSatisfy { !$0.contains(": 0 reads") }, "no history was checked")
        #expect(checked.allSatisfy { $0.hasSuffix("read your writes 0, monotonic reads 0") })
    }

    /// The same under tokens and a per-user table (`--per-user`): one user's devices converge, another user
    /// sees none of the rows. Seeds 1 and 3 bite: before the client took a retried insert whose row came back
    /// with the server's `userId` as its own, they reported "a conflict on an item no other device wrote".
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "mixed"])
    func oneUsersDevicesConvergeOnAPerUserTable(protocol: String) async throws {
        let output = try await runChaos(
            [
                "--per-user", "--seed", "1", "--seed", "3", "--devices", "3", "--steps", "30", "--time-limit", "90",
                "--protocol", `protocol`,
            ])
        #expect(!output.contains(" 0 reply lost after commit"), "the seeds lose replies after commits")
    }

    #if os(Linux)
        /// SIGTERM to a run stops its server and devices too, not only itself (they outlived it before).
        @Test(.timeLimit(.minutes(1)))
        func aTerminatedRunLeavesNoProcessBehind() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "chaos-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let run = await RunningProcess(
                Products.path("sync-chaos"),
                ["--devices", "2", "--steps", "10000", "--time-limit", "50", "--directory", directory.path])
            let pid = run.processIdentifier
            #expect(pid != 0, "sync-chaos did not start")
            let children = { Self.processes(mentioning: directory.path).filter { $0 != pid } }
            let started = ContinuousClock.now
            while children().isEmpty, started.duration(to: .now) < .seconds(20) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(!children().isEmpty, "the run started no server")
            run.signal(SIGTERM)
            #expect(await run.exitStatus(within: .seconds(20)) == 128 + SIGTERM)
            let stopped = ContinuousClock.now
            while !children().isEmpty, stopped.duration(to: .now) < .seconds(5) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(children().isEmpty)
        }

        /// The ids of live processes whose command line mentions `text` (from /proc).
        static func processes(mentioning text: String) -> [Int32] {
            let ids =
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { Int32($0) } ?? []
            return ids.filter { id in
                guard let line = FileManager.default.contents(atPath: "/proc/\(id)/cmdline") else { return false }
                let isZombie =
                    (try? String(contentsOfFile: "/proc/\(id)/stat", encoding: .utf8))?.contains(") Z ") ?? true
                return !isZombie && String(decoding: line, as: UTF8.self).contains(text)
            }
        }
    #endif
}

/// The chaos runs of the modes beside the plain one (see ``ChaosTests``).
@Suite(.timeLimit(.minutes(3))) struct ChaosModeTests {
    /// Pulls of many pages under the same faults (issue 17): the devices' pulls start at pages of 3 rows and
    /// grow to 6, where each round trip also asks the page after the next (`$skip`), joined only when it starts
    /// at the next page's last row; the proxy faults those requests as any other, and devices are killed
    /// between pages. Checks as above, and that pages were asked ahead. The proxy waits 25 ms before forwarding
    /// each request, as a link would: a pull asks ahead only while it waits for the network longer than the store
    /// takes. With pages growing to 12 and no wait, that was a race a loaded machine lost: a clean-clone CI run
    /// asked no page ahead (runs before had asked 1–3); now 12–15 with three runs at once on two cores.
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "mixed"])
    func devicesPullingSmallPagesAheadUnderFaultsConverge(protocol: String) async throws {
        let output = try await runChaos(
            [
                "--seed", "2", "--devices", "4", "--steps", "60", "--time-limit", "90", "--protocol", `protocol`,
                "--latency-ms", "25",
            ], environment: ["TODO_PULL_PAGE_SIZE": "3", "TODO_MAX_PULL_PAGE_SIZE": "6"])
        #expect(!output.contains("(0 pages asked ahead)"), "no page was asked ahead")
    }

    /// Files under the same faults (issue 33, `--attachments`): devices attach files of 1–8 MB to items — some
    /// killed mid-attach, many mid-sync while their uploads run — and the server is killed mid-upload. After
    /// settling: every live row's file is served byte-exact, every stored file is its hash, every device opens
    /// every file its items name byte-exact, no file is left to upload, and an acknowledged file leaves its item
    /// only for a later attach or a conflict over it. Seeds 1, 27 and 52, three devices, mixed dialects (both on one
    /// table): the files load the machine (a larger run beside the whole suite starved its timed tests); more seeds
    /// by hand. Seed 27 failed 1 run in about 12 under load, before the client took only a 200 or 201 for a stored
    /// file (it took an upload holding every byte, not yet named, for one): its row was refused as naming a missing
    /// file, a conflict no other device made, and its acknowledged add discarded. The deterministic case is
    /// `AttachmentSyncTests.anUploadHoldingEveryByteIsFinishedBeforeTheRowAndAnEmptyFileGoesToo`. Seed 52 failed 1
    /// run in 87: an acknowledged file gone from its item, no conflict shown — a v3 device's retried update met the
    /// other device's row (with the file) and took its version only, and its newer `PUT` replaced the row without
    /// the file. The deterministic case is `PushFaultTests.aNewerEditAfterALostUpdateReplyKeepsAFieldAnotherDeviceSetMeanwhile`.
    ///
    /// One process per seed, each with its own limit: the three in one process took 132–158 s of its 170 s in the
    /// whole suite, and one run was stopped during seed 52 (2026-11-27).
    @Test(.timeLimit(.minutes(3)), arguments: [1, 27, 52])
    func filesAttachedUnderFaultsAndKillsArriveWholeEverywhere(seed: Int) async throws {
        let output = try await runChaos(
            [
                "--attachments", "--seed", "\(seed)", "--devices", "3", "--steps", "30", "--time-limit", "110",
                "--protocol", "mixed",
            ])
        #expect(!output.contains(" 0 acknowledged"), "no file was attached")
        #expect(!output.contains(" 0 opened on devices"), "no file was opened")
    }

    /// Edits of different fields of the same rows under the same faults (`--fields`, issue 47): even-numbered devices
    /// change only the text of the first six items, odd ones only done/not done (a third of the time two items as one
    /// change set, issue 49). Checked besides the usual: no device met a conflict on an item whose field no other
    /// device changed (unless it was deleted) or was shown one naming the field it does not change, and each device's
    /// last acknowledged change of a field only it changed is on the server. Seed 8 on both dialects on one table
    /// (the odd devices speak v3: their sets go one by one), seed 13 on v2 (its sets are atomic, and meet conflicts:
    /// alone, 13 applied whole and 9 refused whole).
    ///
    /// Under load it found two merge bugs, each now a test of its own: `MergeTests.aFieldTheServerHoldsAs…` and
    /// `MergeTests.takingTheServersRowUnderANewerEdit…` (an acknowledged done lost after a take-server under a newer
    /// edit); with sets, `ChangeSetPushTests.aMemberTheServerAlreadyHolds…` (a set refused at every push) and
    /// `MergeTests.takingTheServersRowUnderSeveralWaitingEdits…`; at 12 devices × 150 steps, seed 44 (half of its
    /// runs: a later edit sent before an update merged to go on the next push, a conflict naming the text on a done
    /// device, two conflicts parked for one item) and `MergeTests.anUpdateMergedAndLeftForTheNextPush…`. A failed seed
    /// keeps its folder (or run it by hand with `--directory DIR`): each device's `device-N.history` is there.
    @Test(
        .timeLimit(.minutes(5)),
        arguments: [
            ("mixed", "8", "4", "30", "80"), ("v2", "13", "4", "30", "80"), ("mixed", "44", "12", "150", "200"),
        ])
    func editsOfDifferentFieldsUnderFaultsMergeByThemselves(
        protocol: String, seed: String, devices: String, steps: String, timeLimit: String
    ) async throws {
        let output = try await runChaos(
            [
                "--fields", "--seed", seed, "--devices", devices, "--steps", steps, "--time-limit", timeLimit,
                "--protocol", `protocol`,
            ])
        let lines = output.split(separator: "\n")
        // Under load a seed makes fewer steps (CI once met none in seed 13): the run's opening makes one for sure.
        #expect(
            lines.contains { $0.contains("merged with other devices' edits") && !$0.hasSuffix(" by themselves: 0") })
        if `protocol` == "v2" {
            #expect(lines.contains { $0.contains("  change sets: ") && !$0.contains("; 0 applied whole") }, "no set")
        }
    }

    /// Tombstones that expire under the same faults and kills (`--retention`, issue 66): the server keeps tombstones
    /// 2 s, and devices go away 3–5 s at random (after an edit or a delete made offline) while the others delete and
    /// edit. Checked besides the usual (every device equals the server: nothing deleted is kept by a device back from
    /// away): no row a device deleted is live again unless a device was shown a conflict for it. Every seed must have
    /// devices past the horizon that listed, or it proved nothing.
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "mixed"])
    func devicesAwayPastTheTombstoneRetentionDropWhatWasDeleted(protocol: String) async throws {
        let output = try await runChaos(
            [
                "--retention", "--seed", "1", "--seed", "2", "--devices", "4", "--steps", "40", "--time-limit", "90",
                "--protocol", `protocol`,
            ])
        let lines = output.split(separator: "\n").filter { $0.contains("  retention: ") }
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { !$0.contains(" 0 of 4 devices past the horizon") && $0.hasSuffix("back: 0") })
    }

    /// Encrypted device stores under the same faults and kills (`--encrypted`, issue 48): each device's store has a
    /// key of its own (`todo --key-file`). Checked besides the usual: no file of any device's store holds SQLite's
    /// header or a text of the server's rows. Its first runs found commits lost with a killed process (WAL recovery
    /// stopped at the first frame; `EncryptedStoreTests.commitsInTheWALSurviveACrash`): 3 of 4 runs of seed 1 failed.
    @Test(.timeLimit(.minutes(3)))
    func encryptedDeviceStoresUnderFaultsAndKillsConverge() async throws {
        let output = try await runChaos(
            [
                "--encrypted", "--seed", "1", "--devices", "4", "--steps", "60", "--time-limit", "120",
                "--protocol", "mixed",
            ])
        #expect(output.contains("texts: none found"))
        #expect(!output.contains(" 0 devices mid-sync"), "no device was killed mid-sync")
    }

    /// Shared lists under faults (`--shared`, issue 32): each device is a user who makes a list, shares it with
    /// the others and stops sharing it at random while every fault, kill and partition goes on. After settling,
    /// every device holds exactly its user's scope (no item or list out of it, none missing), nothing waits, and
    /// no acknowledged add is lost unless it was deleted or refused (added into a list its user had left). Devices
    /// also make more lists, each with its owner as one change set (issue 49), some killed mid-way: a watcher of the
    /// server's database sees no list without its owner and no owner without its list among those of v2 devices
    /// (with the `todo` of before change sets, seeds 1–3 showed 2–6 half sets each), and no device reads a list of
    /// theirs without its owner (`todo sync` pulls lists and members together; with the `todo` of separate pulls,
    /// seed 2 of seeds 1–6 read one). The v2 run is on SQLite, the mixed one on PostgreSQL (`--postgres`).
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "mixed"])
    func usersSharingListsUnderFaultsEachEndWithTheirScope(protocol: String) async throws {
        // The mixed run's server is on PostgreSQL (a cluster of its own): no watcher of its file, the devices' checks.
        let onPostgres = `protocol` == "mixed"
        let output = try await runChaos(
            [
                "--shared", "--seed", "1", "--seed", "2", "--devices", "3", "--steps", "30", "--time-limit", "90",
                "--protocol", `protocol`,
            ] + (onPostgres ? ["--postgres"] : []))
        let runs = output.split(separator: "\n").filter { $0.contains(" killed mid-way)") }
        #expect(runs.count == 2 && !runs.allSatisfy { $0.contains(" 0 unshares,") }, "the seeds stop sharing lists")
        let sets = output.split(separator: "\n").filter { $0.contains("  change sets: ") }
        #expect(
            sets.count == 2 && sets.allSatisfy { $0.hasSuffix("half sets read: 0") && !$0.contains(" 0 device reads") })
        if onPostgres {
            #expect(sets.allSatisfy { $0.contains("server not watched (PostgreSQL)") })
        } else {
            #expect(sets.allSatisfy { $0.contains("half-applied sets seen: 0;") })
            #expect(!sets.contains { $0.contains(" 0 snapshots") }, "the server was watched")
        }
        #expect(!sets.allSatisfy { $0.contains(": 0 applied whole") }, "no set was pushed")
    }
}

/// Runs `sync-chaos` with `arguments` (170 s at most, a hang guard beside each case's own `--time-limit`), prints its
/// report, and expects it to have exited 0 having passed every seed `arguments` names; returns the report.
func runChaos(
    _ arguments: [String], environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
) async throws -> String {
    let result = try await runProduct("sync-chaos", arguments, environment: environment, timeout: .seconds(170))
    print(result.output)
    let seeds = arguments.filter { $0 == "--seed" }.count
    #expect(result.status == 0, "\(result.output)\(result.error)", sourceLocation: sourceLocation)
    #expect(
        result.output.contains("sync-chaos: \(seeds) of \(seeds) seed(s) passed"), sourceLocation: sourceLocation)
    return result.output
}
