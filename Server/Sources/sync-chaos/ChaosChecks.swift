import Foundation
import SyncCore
import TestSupport

/// What a run checks once its devices settled: every device equals the server (or, shared, its user's scope), nothing
/// pending or waiting, no item twice, no acknowledged write lost, every attached file whole.
extension ChaosRun {
    /// The checks of a shared run after settling: every device holds exactly its user's scope — the items and lists
    /// the server shows that user, no more (no row out of scope), no fewer, in the same text — with nothing pending
    /// or waiting; no text twice on the server; no acknowledged add lost unless it was deleted or its device was
    /// told of a refusal (an add into a list its user had left).
    static func checkShared(server: ChaosServer, devices: [Device], tokens: [String]) async throws -> [String] {
        var failures: [String] = []
        for (device, token) in zip(devices, tokens) {
            let truth = Self.items(of: try await server.rows(token: token))
            if let problem = Self.difference(
                device, holds: try await device.items(), from: truth, "its user's scope", "out of scope")
            {
                failures.append(problem)
            }
            let lists = Set(
                try await server.rows(table: "TodoList", token: token).filter { !$0.isDeleted }.compactMap {
                    $0["id"]?.stringValue
                })
            if Set(try await device.lists()) != lists {
                failures.append(
                    "\(device.name)'s lists are not its user's: \(try await device.lists().count) held, \(lists.count) in scope"
                )
            }
            if let problem = try await Self.leftovers(device) { failures.append(problem) }
        }
        var everything: [String: String] = [:]
        for token in tokens {
            for row in try await server.rows(token: token) where !row.isDeleted {
                everything[row["id"]?.stringValue ?? ""] = row["text"]?.stringValue ?? ""
            }
        }
        let texts = Array(everything.values)
        if Set(texts).count != texts.count { failures.append("a text appears on several live server rows") }
        let deleted = devices.reduce(into: Set<String>()) { $0.formUnion($1.deletes) }
        for device in devices {
            for short in device.acknowledgedAdds {
                let onServer = everything.keys.contains { $0.hasPrefix(short) }
                let excused =
                    deleted.contains { $0.hasPrefix(short) } || device.conflicted.contains { $0.hasPrefix(short) }
                if !onServer, !excused {
                    failures.append("acknowledged add \(short) of \(device.name) was lost (not deleted, not refused)")
                }
            }
        }
        return failures
    }

    /// The check of a run with tombstones that expire (``Settings/retention``), after settling: no row a device deleted
    /// (acknowledged) is live on the server — every device equals the server, checked before — unless a device was
    /// shown a conflict for it (whose choice may rightly bring it back). Returns the problems and the report's line.
    static func checkDeletesStay(rows: [JSONValue], devices: [Device]) -> ([String], String) {
        let live = Set(rows.filter { !$0.isDeleted }.compactMap { $0["id"]?.stringValue })
        let excused = devices.reduce(into: Set<String>()) { $0.formUnion($1.conflicted) }
        var problems: [String] = []
        for device in devices {
            for id in device.acknowledgedDeletes.sorted() where live.contains(id) && !excused.contains(id) {
                problems.append("\(device.name) deleted \(id.prefix(8)) (acknowledged), and it is live again")
            }
        }
        func total(_ count: (Device) -> Int) -> Int { devices.map(count).reduce(0, +) }
        let line =
            "  retention: \(retentionSeconds) s; \(total(\.awaySpells)) spells away; "
            + "\(devices.filter { $0.reconciliations > 0 }.count) of \(devices.count) devices past the horizon, "
            + "\(total(\.reconciliations)) listing(s), \(total(\.reconciledRows)) rows reconciled; "
            + "\(total(\.acknowledgedDeletes.count)) acknowledged deletes, back: \(problems.count)"
        return (problems, line)
    }

    /// The live rows as `todo list --json` shows items: id → "text|complete".
    static func items(of rows: [JSONValue]) -> [String: String] {
        Dictionary(
            rows.filter { !$0.isDeleted }.map {
                ($0["id"]?.stringValue ?? "", "\($0["text"]?.stringValue ?? "")|\($0["complete"]?.boolValue ?? false)")
            }, uniquingKeysWith: { first, _ in first })
    }

    /// How a device's items differ from `truth` (what `what` holds), or nil when they do not; `extra` names the items
    /// the device has and `truth` has not.
    static func difference(
        _ device: Device, holds items: [String: String], from truth: [String: String], _ what: String, _ extra: String
    ) -> String? {
        guard items != truth else { return nil }
        let missing = truth.keys.filter { items[$0] == nil }.sorted()
        let surplus = items.keys.filter { truth[$0] == nil }.sorted()
        let differing = items.keys.filter { truth[$0] != nil && truth[$0] != items[$0] }.sorted()
        // The ids (their first 8 characters) and texts, so that a failure says which rows to look for in the stores.
        func named(_ ids: [String]) -> String {
            ids.isEmpty
                ? ""
                : " ("
                    + ids.prefix(5).map { "\($0.prefix(8)) '\(items[$0] ?? truth[$0] ?? "")'" }.joined(separator: ", ")
                    + ")"
        }
        return "\(device.name) differs from \(what): \(missing.count) missing\(named(missing)), "
            + "\(surplus.count) \(extra)\(named(surplus)), \(differing.count) differing\(named(differing))"
    }

    /// What a device left pending or waiting (changes, conflicts, files to upload), or nil when nothing.
    static func leftovers(_ device: Device) async throws -> String? {
        let status = try JSONValue(parsing: try await device.run(["status", "--json"]).output)
        guard status["pending"] != 0 || status["conflicts"] != 0 || status["filesWaiting"] != 0 else { return nil }
        return "\(device.name) left \(status["pending"] ?? .null) pending, \(status["conflicts"] ?? .null) waiting, "
            + "\(status["filesWaiting"] ?? .null) files to upload"
    }

    /// The checks of a run with files, after settling: every live row's file is on the server, byte-exact; every
    /// stored file is its hash (each stored once); every device opens every file its items name, byte-exact; and of
    /// the attaches acknowledged, each is on the server unless its item was deleted or given another file later.
    /// Returns the problems and the report's line.
    static func checkAttachments(server: ChaosServer, rows: [JSONValue], devices: [Device], folder: URL) async throws
        -> ([String], String)
    {
        var problems: [String] = []
        let named = Set(rows.filter { !$0.isDeleted }.compactMap { $0["file"]?.stringValue })
        for hash in named {
            guard let bytes = try await server.attachment(hash) else {
                problems.append("a live row names \(hash.prefix(12))…, which the server does not serve")
                continue
            }
            if sha256(bytes) != hash { problems.append("the server's \(hash.prefix(12))… is not its bytes") }
        }
        let (stored, storedBytes) = Self.checkStoredFiles(in: folder, problems: &problems)
        var opened = 0
        for device in devices {
            let (found, checked) = try await device.checkFiles()
            problems += found
            opened += checked
        }
        let acknowledged = devices.flatMap { device in device.attaches.filter(\.acknowledged) }
        let live = Dictionary(
            rows.filter { !$0.isDeleted }.compactMap { row in row["id"]?.stringValue.map { ($0, row) } },
            uniquingKeysWith: { first, _ in first })
        var onServer = 0
        var superseded = 0
        var ofDeleted = 0
        for attach in acknowledged {
            guard let row = live[attach.id] else {
                ofDeleted += 1
                continue
            }
            if row["file"]?.stringValue == attach.hash {
                onServer += 1
                continue
            }
            // Only another attach to the item, or a conflict over it (whose resolution may keep a copy without the
            // file), may replace it: an edit of a device that has the row keeps its file.
            let later = devices.contains { device in
                device.attaches.contains { $0.id == attach.id && $0.hash != attach.hash }
                    || device.conflicted.contains(attach.id)
            }
            if later {
                superseded += 1
            } else {
                problems.append("the acknowledged file \(attach.hash.prefix(12))… of \(attach.id.prefix(8)) was lost")
            }
        }
        let started = devices.map(\.attaches.count).reduce(0, +)
        let bytes = devices.flatMap(\.attaches).filter(\.acknowledged).map(\.size).reduce(0, +)
        let line =
            "  files: \(started) attaches started, \(acknowledged.count) acknowledged (\(bytes / 1_000_000) MB); "
            + "\(onServer) on live rows, \(superseded) replaced by a later attach or a conflict, \(ofDeleted) of deleted items; "
            + "server holds \(stored) (\(storedBytes / 1_000_000) MB), rows name \(named.count); "
            + "\(opened) opened on devices, byte-exact"
        return (problems, line)
    }

    /// Every file the server stores in `folder` is its hash.
    ///
    /// - Returns: How many files it holds, and their bytes.
    private static func checkStoredFiles(in folder: URL, problems: inout [String]) -> (count: Int, bytes: Int) {
        let stored = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var bytes = 0
        for name in stored {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else {
                continue
            }
            bytes += data.count
            if sha256(data) != name { problems.append("the stored file \(name.prefix(12))… is not its bytes") }
        }
        return (stored.count, bytes)
    }

    static func merged(_ counts: [[String: Int]]) -> [String: Int] {
        counts.reduce(into: [:]) { total, next in total.merge(next, uniquingKeysWith: +) }
    }

    /// The checks after settling.
    static func check(rows: [JSONValue], devices: [Device]) async throws -> [String] {
        var failures: [String] = []
        let live = rows.filter { !$0.isDeleted }
        let truth = Self.items(of: live)
        // 1. Every device equals the server; nothing pending or waiting.
        for device in devices {
            if let problem = Self.difference(
                device, holds: try await device.items(), from: truth, "the server", "extra")
            {
                failures.append(problem)
            }
            if let problem = try await Self.leftovers(device) { failures.append(problem) }
        }
        // 2. No item twice: texts are unique per write, and an add reaches the server at most once.
        let texts = live.compactMap { $0["text"]?.stringValue }
        if Set(texts).count != texts.count { failures.append("a text appears on several live server rows") }
        failures += Self.checkAcknowledgedAdds(ids: rows.compactMap { $0["id"]?.stringValue }, truth, devices)
        // 4. An item only one device wrote to (added, edited, completed or reopened, attached to, deleted) never
        //    conflicts, and ends with that device's last acknowledged edit (or a later one that was killed after it
        //    committed). Items are keyed by the 8-character prefix `todo add` prints.
        let writers = Self.writers(devices)
        for device in devices {
            let mine = Dictionary(grouping: device.edits, by: \.id)
            for (id, edits) in mine
            where writers[String(id.prefix(8))] == [device.index] && !device.yielded.contains(id) {
                guard let lastAcknowledged = edits.lastIndex(where: \.acknowledged) else { continue }
                let allowed = Set(edits[lastAcknowledged...].map(\.text))
                let final = truth[id]?.components(separatedBy: "|").first
                if let final, !allowed.contains(final) {
                    failures.append("\(device.name)'s acknowledged edit of \(id.prefix(8)) was lost (server: \(final))")
                }
            }
            for id in device.conflicted where writers[String(id.prefix(8))] == [device.index] {
                failures.append(
                    "\(device.name) met a conflict on \(id.prefix(8)), which no other device wrote "
                        + "(shown: \(device.shownFor[id] ?? "?"))")
            }
        }
        return failures
    }

    /// 3. No acknowledged add lost, unless some device deleted it (an add deleted before any sync never reaches the
    ///    server at all), and none on the server twice.
    private static func checkAcknowledgedAdds(ids: [String], _ truth: [String: String], _ devices: [Device])
        -> [String]
    {
        var failures: [String] = []
        let deleted = devices.reduce(into: Set<String>()) { $0.formUnion($1.deletes) }
        for device in devices {
            for short in device.acknowledgedAdds {
                let matching = ids.filter { $0.hasPrefix(short) }
                let wasDeleted = deleted.contains { $0.hasPrefix(short) }
                if matching.count > 1 {
                    failures.append(
                        "acknowledged add \(short) of \(device.name) is on the server \(matching.count) times")
                } else if !wasDeleted, matching.first.flatMap({ truth[$0] }) == nil {
                    failures.append("acknowledged add \(short) of \(device.name) was lost (nobody deleted it)")
                }
            }
        }
        return failures
    }

    /// The devices that wrote to each item (by 8-character prefix): added, edited, completed or reopened (a run by
    /// fields), deleted, attached to (a write of the whole item too).
    private static func writers(_ devices: [Device]) -> [String: Set<Int>] {
        var writers: [String: Set<Int>] = [:]
        for device in devices {
            let ids =
                device.acknowledgedAdds + device.edits.map(\.id) + device.completions.map(\.id) + device.deletes
                + device.attaches.map(\.id)
            for id in ids { writers[String(id.prefix(8)), default: []].insert(device.index) }
        }
        return writers
    }

    /// An encrypted run (``ChaosRun/Settings/encrypted``): every file of every device's store (database, WAL, index,
    /// journal, key file) is scanned for SQLite's header and for each text of the server's rows (the device's own
    /// adds and edits among them); none may be found. Every attachment file of a device must be sealed. Returns the problems and a line for the report.
    static func checkEncrypted(directory: URL, devices: Int, rows: [JSONValue]) -> ([String], String) {
        let texts = Set(rows.compactMap { $0["text"]?.stringValue }.filter { $0.utf8.count >= 5 })
        let canaries = [Array("SQLite format 3".utf8)] + texts.sorted().map { Array($0.utf8) }
        var problems: [String] = []
        var files = 0
        var bytes = 0
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for index in 0..<devices {
            for name in names.sorted() where name.hasPrefix("device-\(index).sqlite") {
                guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
                else { continue }
                files += 1
                bytes += data.count
                for canary in canaries where data.firstRange(of: canary) != nil {
                    problems.append("\(name) holds \"\(String(decoding: canary, as: UTF8.self))\" in the clear")
                }
            }
            // Attachment files: each sealed (docs/encryption.md), its bytes unreadable.
            let folder = directory.appendingPathComponent("device-\(index).sqlite.attachments")
            for name in ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted() {
                guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path),
                    !name.hasSuffix(".tmp")
                else { continue }
                files += 1
                bytes += data.count
                if !data.starts(with: Array("OSYNCAF1".utf8)) {
                    problems.append("device-\(index)'s attachment \(name.prefix(12)) is not sealed")
                }
            }
        }
        if files == 0 { problems.append("no device store file was found to scan") }
        return (
            problems,
            "  encrypted stores: \(files) files (\(bytes) bytes) scanned for SQLite's header and \(texts.count) texts: "
                + "\(problems.isEmpty ? "none found" : "\(problems.count) found")"
        )
    }

    /// How many items had their text changed by one device and their `complete` by another (by 8-character prefix).
    static func sharedRows(_ devices: [Device]) -> Int {
        var text: [String: Set<Int>] = [:]
        var done: [String: Set<Int>] = [:]
        for device in devices {
            for edit in device.edits { text[String(edit.id.prefix(8)), default: []].insert(device.index) }
            for change in device.completions { done[String(change.id.prefix(8)), default: []].insert(device.index) }
        }
        return text.filter { short, editors in done[short].map { !$0.subtracting(editors).isEmpty } ?? false }.count
    }

    /// A run by fields (``ChaosRun/Settings/fields``, issue 47): a device met no conflict on an item whose field it
    /// changes no other device changed (unless someone deleted the item), and its last acknowledged change of a field
    /// only it changed is on the server (or a later one, killed after it committed) — whatever the other field's
    /// changes did meanwhile. Items are keyed by the 8-character prefix `todo add` prints.
    static func checkFields(rows: [JSONValue], devices: [Device]) -> [String] {
        var failures: [String] = []
        var live: [String: JSONValue] = [:]
        for row in rows where !row.isDeleted { if let id = row["id"]?.stringValue { live[id] = row } }
        let deleted = devices.reduce(into: Set<String>()) { $0.formUnion($1.deletes.map { String($0.prefix(8)) }) }
        var textWriters: [String: Set<Int>] = [:]
        var completeWriters: [String: Set<Int>] = [:]
        for device in devices {
            for edit in device.edits { textWriters[String(edit.id.prefix(8)), default: []].insert(device.index) }
            for change in device.completions {
                completeWriters[String(change.id.prefix(8)), default: []].insert(device.index)
            }
        }
        for device in devices {
            let writers = device.editsCompletion ? completeWriters : textWriters
            let field = device.editsCompletion ? "done" : "text"
            // A conflict names the fields changed on both sides: never one this device does not change.
            let other = device.editsCompletion ? "text" : "complete"
            for (id, fields) in device.conflictFields.sorted(by: { $0.key < $1.key }) where fields.contains(other) {
                failures.append(
                    "\(device.name) was shown a conflict on \(id.prefix(8))'s \(other), which it never changes "
                        + "(shown: \(device.shownFor[id] ?? "?"))")
            }
            for id in device.conflicted {
                let short = String(id.prefix(8))
                guard !deleted.contains(short), writers[short, default: []].subtracting([device.index]).isEmpty else {
                    continue
                }
                failures.append(
                    "\(device.name) met a conflict on \(short), whose \(field) no other device changed "
                        + "(shown: \(device.shownFor[id] ?? "?"))")
            }
            for (id, values) in Self.valuesSet(by: device).sorted(by: { $0.key < $1.key }) {
                let short = String(id.prefix(8))
                guard writers[short] == [device.index], !deleted.contains(short), !device.yielded.contains(id),
                    let row = live[id]
                else { continue }
                let value =
                    device.editsCompletion
                    ? String(row["complete"]?.boolValue ?? false) : row["text"]?.stringValue ?? ""
                if !values.contains(value) {
                    failures.append(
                        "\(device.name)'s acknowledged \(field) change of \(short) was lost (server: \(value))")
                }
            }
        }
        return failures
    }

    /// The values a device of a run by fields set, per item, from its last acknowledged one on.
    private static func valuesSet(by device: Device) -> [String: Set<String>] {
        var allowed: [String: Set<String>] = [:]
        if device.editsCompletion {
            for (id, changes) in Dictionary(grouping: device.completions, by: \.id) {
                guard let last = changes.lastIndex(where: \.acknowledged) else { continue }
                allowed[id] = Set(changes[last...].map { String($0.complete) })
            }
        } else {
            for (id, edits) in Dictionary(grouping: device.edits, by: \.id) {
                guard let last = edits.lastIndex(where: \.acknowledged) else { continue }
                allowed[id] = Set(edits[last...].map(\.text))
            }
        }
        return allowed
    }
}
