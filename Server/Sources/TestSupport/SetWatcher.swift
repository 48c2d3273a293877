import Foundation
import GRDB
import SyncSQLite

/// Watches the server's database during a shared run for half-applied change sets (issue 49): each list and its
/// owner's member row are made as one set (`todo lists new`), which a `sync-server` applies atomically for a device
/// that speaks v2. Every few milliseconds it reads, in one read transaction of the server's SQLite file (a snapshot:
/// only committed transactions, each whole), the live lists and the live owner rows, and counts a violation for a
/// list without its owner, or an owner without its list, made by a device whose dialect has atomic sets.
///
/// What it can miss: a half set that lasts less than the time between two snapshots (it samples; it does not see
/// every commit), and sets of devices speaking v3 (sent one by one by design). The end state is checked as well.
public final class SetWatcher: Sendable {
    private struct State {
        var snapshots = 0
        var violations: [String] = []
    }

    private let path: String
    /// The users whose sets must be atomic (their devices speak v2).
    private let atomicUsers: Set<String>
    private let state = Locked(State())

    /// A watcher of the server database at `path`.
    ///
    /// - Parameters:
    ///   - path: The server's SQLite file.
    ///   - atomicUsers: The users whose sets must be atomic (their devices speak v2).
    public init(database path: String, atomicUsers: Set<String>) {
        self.path = path
        self.atomicUsers = atomicUsers
    }

    /// How many snapshots were checked, and the violations seen (at most one line per list).
    public var findings: (snapshots: Int, violations: [String]) {
        state.withLock { ($0.snapshots, $0.violations) }
    }

    /// Reads snapshots until cancelled, then one more.
    public func run() async {
        var configuration = Configuration()
        configuration.readonly = true
        guard let database = try? DatabaseQueue(path: path, configuration: configuration) else { return }
        while !Task.isCancelled {
            await check(database)
            try? await Task.sleep(for: .milliseconds(40))
        }
        await check(database)
    }

    /// The half-applied sets of one snapshot: a list (id → name) without an owner row, or an owner row (list id →
    /// user) without its list, made by one of `atomicUsers` (a list's maker is the last word of its name, as
    /// `sync-chaos` names them: "list of user-1", "list 2 of user-1").
    public static func halfSets(lists: [String: String], owners: [String: String], atomicUsers: Set<String>)
        -> [String]
    {
        var found: [String] = []
        for (id, name) in lists.sorted(by: { $0.key < $1.key }) where owners[id] == nil {
            let maker = String(name.split(separator: " ").last ?? "")
            if atomicUsers.contains(maker) { found.append("list \(id.prefix(8)) (\(name)) without its owner") }
        }
        for (list, user) in owners.sorted(by: { $0.key < $1.key })
        where lists[list] == nil && atomicUsers.contains(user) {
            found.append("owner \(user) of list \(list.prefix(8)) without the list")
        }
        return found
    }

    /// One snapshot: the lists and owners as one committed state.
    private func check(_ database: DatabaseQueue) async {
        let snapshot = try? await database.read { db -> (lists: [String: String], owners: [String: String]) in
            guard try db.tableExists("todolist"), try db.tableExists("listmember") else { return ([:], [:]) }
            let lists = try Row.fetchAll(db, sql: #"SELECT "id", "name" FROM "todolist" WHERE NOT "deleted""#)
            let owners = try Row.fetchAll(
                db, sql: #"SELECT "listId", "userId" FROM "listmember" WHERE NOT "deleted" AND "role" = 'owner'"#)
            return (
                Dictionary(
                    lists.map { ($0["id"] as String, $0["name"] as String? ?? "") }, uniquingKeysWith: { a, _ in a }),
                Dictionary(
                    owners.map { ($0["listId"] as String, $0["userId"] as String) }, uniquingKeysWith: { a, _ in a })
            )
        }
        guard let snapshot else { return }
        let found = Self.halfSets(lists: snapshot.lists, owners: snapshot.owners, atomicUsers: atomicUsers)
        state.withLock { state in
            state.snapshots += 1
            for line in found where !state.violations.contains(line) { state.violations.append(line) }
        }
    }
}
