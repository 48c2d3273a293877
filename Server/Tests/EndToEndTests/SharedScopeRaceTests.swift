import Foundation
import OfflineSync
import SyncCore
import SyncSQLite
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Issue 32's no-miss / no-repeat race (docs/sharing.md): a real `sync-server` on the shared lists' configuration, on
/// SQLite and on PostgreSQL; 4 writers (an owner of lists g0–g3) insert, change and move rows between the lists while
/// a fifth task adds bob to and removes him from g1–g3, and bob's device pulls incrementally all the while. Covered:
/// rows inserted, changed and moved in and out of bob's lists, joins and leaves, all concurrent with his pages. Once
/// everything stops, one more pull must leave bob's device holding exactly the server's rows in his scope, each in
/// the server's version — none missing, none out of scope. Bounded: 4 × 120 writes, 40 membership changes; fixed
/// seeds.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SharedScopeRaceTests {
    static let writers = 4
    static let writesPerWriter = 120
    static let membershipChanges = 40

    @Test(.timeLimit(.minutes(3)), arguments: ["sqlite", "postgres"])
    func bobsDeviceSettlesOnHisScopeWhileListsChangeUnderIt(store: String) async throws {
        if store == "postgres", !PostgresServer.isRequired { return }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scope-race-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        if store == "postgres" {
            try await PostgresServer.withDatabase { url in try await Self.race(database: url, directory: directory) }
        } else {
            try await Self.race(
                database: "sqlite:" + directory.appendingPathComponent("s.sqlite").path, directory: directory)
        }
    }

    static func race(database: String, directory: URL) async throws {
        try await SharedListsExample.withServer(database: database) { port, secret in
            let http = ScopedHTTP(port: port)
            let owner = try await developmentToken("owner", secret: secret)
            let bobToken = try await developmentToken("bob", secret: secret)
            for list in 0..<4 {
                let member: JSONValue = [
                    "id": .string("m-owner-\(list)"), "listId": .string("g\(list)"), "userId": "owner", "role": "owner",
                ]
                #expect(try await http.send("POST", "/tables/ListMember", member, token: owner) == 201)
            }
            #expect(
                try await http.send(
                    "POST", "/tables/ListMember", ["id": "m-bob-0", "listId": "g0", "userId": "bob", "role": "viewer"],
                    token: owner) == 201)

            var configuration = SyncClient.Configuration()
            configuration.tokenProvider = { _ in bobToken }
            configuration.pullPageSize = 20
            configuration.maxPullPageSize = 40
            let bob = SyncClient(
                url: URL(string: "http://127.0.0.1:\(port)")!,
                store: try SQLiteLocalStore(path: directory.appendingPathComponent("bob.sqlite").path),
                configuration: configuration)
            let items = try bob.syncTable("TodoItem")

            let writing = Locked(true)
            async let pulling: (pulls: Int, removed: Int) = {
                var (pulls, removed) = (0, 0)
                while writing.withLock({ $0 }) {
                    removed += try await items.pull(queryID: "items").removedCount
                    pulls += 1
                }
                return (pulls, removed)
            }()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<Self.writers {
                    group.addTask {
                        var random = SplitMix(seed: UInt64(writer + 1))
                        var mine: [String] = []
                        for step in 0..<Self.writesPerWriter {
                            let list = "g\(random.next() % 4)"
                            let roll = random.next() % 10
                            if roll < 7 || mine.isEmpty {
                                let id = "w\(writer)-\(step)"
                                let row: JSONValue = ["id": .string(id), "listId": .string(list), "text": .string(id)]
                                let status = try await http.send("POST", "/tables/TodoItem", row, token: owner)
                                #expect(status == 201)
                                mine.append(id)
                            } else {
                                let id = mine[Int(random.next() % UInt64(mine.count))]
                                let change: JSONValue =
                                    roll < 9 ? ["text": .string("\(id) at \(step)")] : ["listId": .string(list)]
                                let status = try await http.send(
                                    "PATCH", "/tables/TodoItem/\(id)", change, token: owner)
                                #expect(status == 200)
                            }
                        }
                    }
                }
                group.addTask {
                    var random = SplitMix(seed: 99)
                    var member: [Int: String] = [:]
                    for change in 0..<Self.membershipChanges {
                        let list = 1 + Int(random.next() % 3)
                        if let id = member[list] {
                            let status = try await http.send("DELETE", "/tables/ListMember/\(id)", nil, token: owner)
                            #expect(status == 200)
                            member[list] = nil
                        } else {
                            let id = "m-bob-\(list)-\(change)"
                            let row: JSONValue = [
                                "id": .string(id), "listId": .string("g\(list)"), "userId": "bob", "role": "viewer",
                            ]
                            let status = try await http.send("POST", "/tables/ListMember", row, token: owner)
                            #expect(status == 201)
                            member[list] = id
                        }
                    }
                }
                try await group.waitForAll()
            }
            writing.withLock { $0 = false }
            let (pulls, removed) = try await pulling

            try await items.pull(queryID: "items")
            let truth = try await http.rows("/tables/TodoItem", token: bobToken)
            let held = try await items.items()
            let local = Dictionary(
                uniqueKeysWithValues: held.map { ($0["id"]?.stringValue ?? "", $0["version"]?.stringValue ?? "") })
            let missing = Set(truth.keys).subtracting(local.keys)
            let extra = Set(local.keys).subtracting(truth.keys)
            let stale = truth.filter { local[$0.key] != nil && local[$0.key] != $0.value }.map(\.key)
            print(
                "Scope race (\(database.hasPrefix("sqlite") ? "SQLite" : "PostgreSQL")): \(Self.writers * Self.writesPerWriter) writes, "
                    + "\(Self.membershipChanges) membership changes, \(pulls) pulls while writing (\(removed) rows removed); "
                    + "bob's scope \(truth.count) rows: \(missing.count) missing, \(extra.count) out of scope, \(stale.count) stale"
            )
            #expect(missing.isEmpty, "\(missing.sorted().prefix(10))")
            #expect(extra.isEmpty, "\(extra.sorted().prefix(10))")
            #expect(stale.isEmpty, "\(stale.sorted().prefix(10))")
            #expect(try await bob.pendingOperations().isEmpty)
        }
    }
}

/// Requests with a token, to a server on 127.0.0.1.
struct ScopedHTTP: Sendable {
    let port: Int

    func send(_ method: String, _ path: String, _ body: JSONValue?, token: String) async throws -> Int {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.serialized().utf8)
        }
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    /// Every live row the token's user sees, as id → version.
    func rows(_ path: String, token: String) async throws -> [String: String] {
        var rows: [String: String] = [:]
        while true {
            var request = URLRequest(
                url: URL(string: "http://127.0.0.1:\(port)\(path)?$orderby=id&$top=50&$skip=\(rows.count)")!)
            request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let (data, _) = try await URLSession.shared.data(for: request)
            let page = try JSONValue(parsing: data).arrayValue ?? []
            for row in page { rows[row["id"]?.stringValue ?? ""] = row["version"]?.stringValue ?? "" }
            if page.count < 50 { return rows }
        }
    }
}

/// A small seeded generator (SplitMix64), so that a race's choices repeat.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
