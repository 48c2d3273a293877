import Foundation
import SyncCore
import TestSupport

/// A device of a shared run (`--shared`): its lists, made alone or as change sets, shared and left, and every read of
/// them checked for half a change set.
extension Device {
    /// The ids of the lists the device holds.
    func lists() async throws -> [String] {
        let result = try await run(["lists", "--json"])
        guard result.status == 0 else { throw ChaosError("\(name): lists failed: \(result.error)") }
        let lists = try JSONValue(parsing: result.output).arrayValue ?? []
        checkSets(lists)
        return lists.compactMap { $0["id"]?.stringValue }.sorted()
    }

    /// Checks one read of the device's lists (`lists --json`) for half a change set: a list of an atomic user's set
    /// shown without its owner. The read cannot show the other half (an owner's member row without its list).
    private func checkSets(_ lists: [JSONValue]) {
        guard user != nil else { return }
        var (names, owners): ([String: String], [String: String]) = ([:], [:])
        for list in lists {
            guard let id = list["id"]?.stringValue else { continue }
            names[id] = list["name"]?.stringValue ?? ""
            for (member, role) in list["members"]?.objectValue ?? [:] where role == "owner" { owners[id] = member }
        }
        listReadsChecked += 1
        for line in SetWatcher.halfSets(lists: names, owners: owners, atomicUsers: atomicUsers)
        where !halfSetsRead.contains(line) {
            halfSetsRead.append(line)
            history.append("half set read: \(line)")
        }
    }

    /// Makes the device's own list (at the start of a shared run).
    func makeList() async throws {
        let result = try await run(["lists", "new", "list of \(user ?? name)"])
        guard result.status == 0 else { throw ChaosError("\(name): lists new failed: \(result.error)") }
    }

    /// Makes another list of the device's user — a change set of the list and its owner's member row — maybe killed
    /// mid-way. Its name ends with the user, for ``SetWatcher``.
    func makeList(killAfter: Int?) async throws {
        let result = try await run(
            ["lists", "new", "list \(setsMade + setsKilled + 1) of \(user ?? name)"], killAfter: killAfter)
        if result.wasKilled {
            setsKilled += 1
            killedWrites += 1
        } else if result.status == 0 {
            setsMade += 1
        }
    }

    /// Shares the device's own list with another user, as an editor, or stops sharing it with one.
    func changeSharing(share: Bool) async throws {
        defer { events.record(.synced) }  // a list shared or left changes what the device holds
        let lists = try JSONValue(parsing: try await run(["lists", "--json"]).output).arrayValue ?? []
        checkSets(lists)
        let mine = lists.first { $0["members"]?[user ?? ""] == "owner" }
        guard let list = mine?["id"]?.stringValue, !others.isEmpty else { return }
        if share {
            let other = others[Int(random.next() % UInt64(others.count))]
            if try await run(["share", list, other]).status == 0 { shares += 1 }
        } else {
            let members = (mine?["members"]?.objectValue?.keys.filter { $0 != user } ?? []).sorted()
            guard !members.isEmpty else { return }
            let other = members[Int(random.next() % UInt64(members.count))]
            if try await run(["unshare", list, other]).status == 0 { unshares += 1 }
        }
    }
}
