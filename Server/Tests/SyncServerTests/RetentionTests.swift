import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import SyncCore
import SyncOData
import SyncSQLite
import Testing

@testable import SyncServer

/// Tombstones that expire (issue 66), on both stores: the store removes tombstones older than a cutoff in batches and
/// keeps the table's horizon (the newest stamp removed), stamps later writes past it, and tells a pull whose cursor is
/// older — in every spelling of a cursor, v2 and v3, on `$skip` pages too — while a pull past it, or a read without
/// deleted rows, hears nothing; the last page of a pull carries a watermark no later write reaches; the collector goes
/// in batches, and two instances on one PostgreSQL database remove each tombstone once; the settings are checked.
@Suite(.timeLimit(.minutes(3))) struct RetentionTests {
    static func table(_ name: String = "Note", perUser: Bool = false) -> TableConfiguration {
        var table = Fixture.table(name)
        table.tombstoneRetention = .seconds(3_600)
        table.perUser = perUser
        return table
    }

    static let name = try! TableName("Note")

    /// Inserts `count` rows `n0`, `n1`, … and deletes the first `deleted` of them, in order.
    static func seed(_ store: any TableStore, count: Int, deleted: Int, scope: RowScope = .everything) async throws {
        for index in 0..<count {
            _ = try await store.insert(
                ["text": .string("row \(index)")], id: try ItemID("n\(index)"), into: name, scope: scope)
        }
        for index in 0..<deleted {
            _ = try await store.delete(try ItemID("n\(index)"), from: name, scope: scope, precondition: nil)
        }
    }

    /// Every row, tombstones too, as the store keeps them.
    static func rows(_ store: any TableStore, scope: RowScope = .everything) async throws -> [JSONValue] {
        var query = ODataQuery()
        query.includeDeleted = true
        query.orderBy = [ODataOrdering("updatedAt")]
        let page = try await store.query(name, query, scope: scope, limit: 10_000, maxBytes: 1 << 24)
        return try JSONValue(parsing: String(decoding: page.itemsJSON, as: UTF8.self)).arrayValue ?? []
    }

    static var ahead: Date { Date().addingTimeInterval(3_600) }

    @Test(arguments: Backend.all)
    func theStoreRemovesOldTombstonesInBatchesAndKeepsTheNewestStampRemoved(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            try await Fixture.withTableStore(Fixture.configuration(database, tables: [Self.table()])) { store in
                try await Self.seed(store, count: 6, deleted: 4)
                let before = try await Self.rows(store)
                let stamps = Dictionary(uniqueKeysWithValues: before.map { ($0.itemID!.rawValue, $0.updatedAt!) })
                // Nothing is old enough yet.
                #expect(
                    try await store.removeTombstones(of: Self.name, olderThan: .seconds(3_600), at: Date(), limit: 3)
                        == TombstoneRemoval(removed: 0, horizon: nil))
                let first = try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 3)
                #expect(first == TombstoneRemoval(removed: 3, horizon: stamps["n2"]))
                let second = try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 3)
                #expect(second == TombstoneRemoval(removed: 1, horizon: stamps["n3"]))
                #expect(
                    try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 3).removed
                        == 0)
                let after = try await Self.rows(store)
                #expect(after.compactMap { $0.itemID?.rawValue } == ["n4", "n5"])
                #expect(after.allSatisfy { !$0.isDeleted })
                // A later write is stamped past the horizon, and a page reading deleted rows carries it.
                let written = try await store.update(
                    try ItemID("n4"), with: ["text": "later"], in: Self.name, scope: .everything, precondition: nil,
                    includeDeleted: false)
                #expect(try #require(written.updatedAt) > stamps["n3"]!)
                var query = ODataQuery()
                query.includeDeleted = true
                let page = try await store.query(Self.name, query, scope: .everything, limit: 10, maxBytes: 1 << 20)
                #expect(page.horizon == stamps["n3"])
                #expect(page.watermark == written.updatedAt)
                query.includeDeleted = false
                let live = try await store.query(Self.name, query, scope: .everything, limit: 10, maxBytes: 1 << 20)
                #expect(live.horizon == nil && live.watermark == nil)
            }
        }
    }

    /// An after-commit hook that never succeeded keeps the writes of a row in the outbox; once its tombstone goes,
    /// they go too — the row's content outlives the retention nowhere — and the other rows' stay.
    @Test(arguments: Backend.all)
    func theUndeliveredWritesOfARemovedRowGoWithIt(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            var table = Self.table()
            table.recordsCommits = true
            try await Fixture.withTableStore(Fixture.configuration(database, tables: [table])) { store in
                try await Self.seed(store, count: 2, deleted: 1)
                let held = try await store.leaseCommits(limit: 10, for: .milliseconds(1))
                #expect(held.compactMap(\.id).sorted() == ["n0", "n0", "n1"])
                #expect(
                    try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 10).removed
                        == 1)
                try await Task.sleep(for: .milliseconds(20))  // the lease ends
                let left = try await store.leaseCommits(limit: 10, for: .seconds(60))
                #expect(left.compactMap(\.id) == ["n1"])
            }
        }
    }

    /// SQLite gives the next stamp after the table's newest row: with every row removed and a clock behind the
    /// horizon, the next write must still pass it (a stamp a device's cursor already passed would never be pulled).
    @Test func aWriteAfterEveryRowWasRemovedIsStampedPastTheHorizonOnSQLite() async throws {
        let directory = try TemporaryDirectory()
        let past = Locked(Date())
        let store = try SQLiteTableStore(path: directory.databasePath, now: { past.withLock { $0 } })
        try await store.prepare([Self.table()])
        try await Self.seed(store, count: 2, deleted: 2)
        let horizon = try #require(
            try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 10).horizon)
        #expect(try await Self.rows(store).isEmpty)
        past.withLock { $0 = horizon.date.addingTimeInterval(-60) }  // a clock set back
        let item = try await store.insert(["text": "new"], id: ItemID("n9"), into: Self.name, scope: .everything)
        #expect(try #require(item.updatedAt) > horizon)
    }

    /// A table written faster than a write a millisecond has stamps ahead of the clock: age is measured from its
    /// newest stamp then, so that its tombstones do not pile up (with the clock, none would ever be old enough).
    @Test func ageIsMeasuredFromTheNewestStampWhenStampsRunAheadOfTheClock() async throws {
        let directory = try TemporaryDirectory()
        let instant = Date()
        let store = try SQLiteTableStore(path: directory.databasePath, now: { instant })  // every stamp bumped
        try await store.prepare([Self.table()])
        try await Self.seed(store, count: 10, deleted: 10)  // stamps instant+0…+9 ms, tombstones +10…+19 ms
        let removal = try await store.removeTombstones(
            of: Self.name, olderThan: .milliseconds(5), at: instant, limit: 100)
        #expect(removal.removed == 4)  // +10…+13: more than 5 ms older than +19
        #expect(removal.horizon == WireDate(millisecondsSince1970: WireDate(instant).millisecondsSince1970 + 13))
    }

    /// A per-user table's page carries the owner's watermark on PostgreSQL (each owner's stamps are their own).
    @Test(arguments: Backend.all)
    func aPerUserPageCarriesTheOwnersWatermark(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            let configuration = Fixture.configuration(database, tables: [Self.table(perUser: true)])
            try await Fixture.withTableStore(configuration) { store in
                let alice = RowScope(owner: "alice")
                try await Self.seed(store, count: 3, deleted: 1, scope: alice)
                var query = ODataQuery()
                query.includeDeleted = true
                let page = try await store.query(Self.name, query, scope: alice, limit: 10, maxBytes: 1 << 20)
                let newest = try await Self.rows(store, scope: alice).compactMap(\.updatedAt).max()
                #expect(page.watermark == newest)
                let bob = try await store.query(
                    Self.name, query, scope: RowScope(owner: "bob"), limit: 10, maxBytes: 1 << 20)
                if backend == .postgres { #expect(bob.watermark == nil) }  // bob never wrote: no stamp of his
            }
        }
    }

    @Test(arguments: Backend.all)
    func aPullOlderThanTheHorizonIsToldSoInEverySpellingOfItsCursor(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            var settings = Fixture.configuration(database, tables: [Self.table()])
            settings.tables[0].pageSize = 2
            let configuration = settings
            try await Fixture.withTableStore(configuration) { store in
                try await Self.seed(store, count: 6, deleted: 3)
                // n3, n4, n5 live, then the tombstones of n0, n1, n2.
                let rows = try await Self.rows(store)
                let stamps = Dictionary(uniqueKeysWithValues: rows.map { ($0.itemID!.rawValue, $0.updatedAt!) })
                // n0, n1
                _ = try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 2)
                let (old, horizon, newer) = (stamps["n3"]!, stamps["n1"]!, stamps["n2"]!)
                let app = try await buildApplication(configuration)
                try await app.test(.router) { client in
                    func answer(_ filter: String?, v3: Bool = false, deleted: Bool = true, extra: String = "")
                        async throws -> Reply
                    {
                        var query =
                            filter.map {
                                "$filter=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&"
                            } ?? ""
                        if deleted { query += v3 ? "__includedeleted=true" : "__includeDeleted=true" }
                        query += extra
                        let headers: HTTPFields = v3 ? [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"] : [:]
                        let reply = try await client.send(
                            .get, "/tables/Note?\(query)", headers: headers, versioned: !v3)
                        #expect(reply.status == .ok, "\(query): \(reply.text)")
                        return reply
                    }
                    let told = horizon.description
                    let v2 = { (date: WireDate) in "datetimeoffset'\(date)'" }
                    let v3 = { (date: WireDate) in "cast(\(date),Edm.DateTimeOffset)" }
                    // Cursors older than the horizon, as each client spells them.
                    for (filter, isV3) in [
                        ("updatedAt ge \(v2(old))", false),
                        ("(text ne 'x') and (updatedAt gt \(v2(old)))", false),
                        ("(updatedAt gt \(v2(old))) or ((updatedAt eq \(v2(old))) and (id gt 'n0'))", false),
                        ("updatedAt gt \(v3(old))", true),
                        ("(updatedAt gt \(v3(old))) or ((updatedAt eq \(v3(old))) and (id gt 'n0'))", true),
                    ] {
                        #expect(try await answer(filter, v3: isV3)["X-Sync-Horizon"] == told, "\(filter)")
                    }
                    // No cursor at all; a $skip page of an old cursor.
                    #expect(try await answer(nil)["X-Sync-Horizon"] == told)
                    #expect(try await answer("updatedAt ge \(v2(old))", extra: "&$skip=2")["X-Sync-Horizon"] == told)
                    // Not behind: a cursor at or past the horizon, a bound on another field alone, no deleted rows.
                    for filter in [
                        "updatedAt ge \(v2(horizon))", "updatedAt gt \(v2(old)) and updatedAt ge \(v2(newer))",
                    ] {
                        #expect(try await answer(filter)["X-Sync-Horizon"] == nil, "\(filter)")
                    }
                    #expect(
                        try await answer("(updatedAt gt \(v2(old))) or (text eq 'x')")["X-Sync-Horizon"] == told)
                    #expect(try await answer("updatedAt ge \(v2(old))", deleted: false)["X-Sync-Horizon"] == nil)
                    // The watermark: on the last page only.
                    let first = try await answer("updatedAt ge \(v2(old))")
                    #expect(first["Link"] != nil && first["X-Sync-Watermark"] == nil)
                    let last = try await answer("updatedAt ge \(v2(newer))")
                    #expect(last["Link"] == nil)
                    #expect(last["X-Sync-Watermark"] == newer.description)
                }
            }
        }
    }

    /// An insert sent again after a lost reply (`X-Sync-Resend-Floor`; v2, v3 and a `/batch` member) is refused 410 when
    /// the table has no trace of its id and may have removed its tombstone — its id is among the removed ones the store
    /// remembers, or ids of tombstones stamped after the insert's floor were forgotten since — and inserted otherwise;
    /// an id the table holds is a 409 as ever, an insert without the header is inserted, a floor that is no date a 400.
    @Test(arguments: Backend.all)
    func anInsertSentAgainOfAnIdWhoseTombstoneWasRemovedIsRefused(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            let configuration = Fixture.configuration(database, tables: [Self.table()])
            try await Fixture.withTableStore(configuration) { store in
                try await Self.seed(store, count: 3, deleted: 2)
                let newest = try #require(try await Self.rows(store).first { $0.itemID?.rawValue == "n1" }?.updatedAt)
                _ = try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 10)
                let (before, past) = (WireDate(millisecondsSince1970: newest.millisecondsSince1970 - 1), newest)
                let app = try await buildApplication(configuration)
                try await app.test(.router) { client in
                    func post(_ id: String, floor: String?, v3: Bool = false) async throws -> HTTPResponse.Status {
                        var headers: HTTPFields = v3 ? [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"] : [:]
                        if let floor { headers[HTTPField.Name(TableConfiguration.resendFloorHeader)!] = floor }
                        return try await client.send(
                            .post, "/tables/Note", json: ["id": .string(id), "text": "again"], headers: headers,
                            versioned: !v3
                        ).status
                    }
                    // Remembered: whatever the floor.
                    #expect(try await post("n0", floor: past.description) == .gone)
                    #expect(try await post("n0", floor: before.description, v3: true) == .gone)
                    let member: JSONValue = [
                        "method": "POST", "url": "tables/Note", "body": ["id": "n1", "text": "again"],
                        "headers": .object([TableConfiguration.resendFloorHeader: .string(past.description)]),
                    ]
                    let batch = try await client.send(.post, "/batch", json: ["requests": [member]])
                    #expect(batch.json?["responses"]?.arrayValue?.first?["status"] == 410)
                    #expect(try await post("fresh", floor: before.description) == .created)
                    #expect(try await post("n2", floor: before.description) == .conflict)
                    #expect(try await post("n1", floor: "yesterday") == .badRequest)
                    // Forgotten (a removal days later): an id past the floor may have been among them.
                    _ = try await store.removeTombstones(
                        of: Self.name, olderThan: .seconds(3_600), at: Date().addingTimeInterval(3 * 86_400), limit: 10)
                    #expect(try await post("never", floor: before.description) == .gone)
                    #expect(try await post("never", floor: past.description) == .created)
                    #expect(try await post("n0", floor: nil) == .created)
                }
            }
        }
    }

    /// A table that refuses stale pulls answers an old client's pull past the horizon 410, with what to do; a first
    /// download, a pull past the horizon and a client that reconciles (the SDK's `HZ` feature) are answered as ever.
    @Test(arguments: Backend.all)
    func aTableThatRefusesStalePullsAnswersOldClients410(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            var settings = Fixture.configuration(database, tables: [Self.table()])
            settings.tables[0].refusesStalePulls = true
            let configuration = settings
            try await Fixture.withTableStore(configuration) { store in
                try await Self.seed(store, count: 3, deleted: 2)
                let rows = try await Self.rows(store)
                let stamps = Dictionary(uniqueKeysWithValues: rows.map { ($0.itemID!.rawValue, $0.updatedAt!) })
                _ = try await store.removeTombstones(of: Self.name, olderThan: .zero, at: Self.ahead, limit: 1)  // n0
                let app = try await buildApplication(configuration)
                try await app.test(.router) { client in
                    func status(after stamp: WireDate?, features: String? = nil) async throws -> Reply {
                        var query = "__includeDeleted=true"
                        if let stamp {
                            query +=
                                "&$filter=" + "updatedAt ge datetimeoffset'\(stamp)'".addingPercentEncoding(
                                    withAllowedCharacters: .alphanumerics)!
                        }
                        var headers: HTTPFields = [:]
                        if let features { headers[HTTPField.Name("X-ZUMO-FEATURES")!] = features }
                        return try await client.send(.get, "/tables/Note?\(query)", headers: headers)
                    }
                    let stale = try await status(after: stamps["n2"]!)
                    #expect(stale.status == .gone)
                    #expect(stale.error?.contains("clear the table's local data") == true, "\(stale.text)")
                    #expect(try await status(after: stamps["n2"]!, features: "TQ,OL,IP,HZ").status == .ok)
                    #expect(try await status(after: nil).status == .ok)
                    #expect(try await status(after: stamps["n0"]!).status == .ok)
                }
            }
        }
    }

    /// 120 tombstones in batches of 50; on PostgreSQL two instances collecting at once remove each once. (Seeded 1,200
    /// in one atomic set, a CI run's whole-suite load kept PostgreSQL past the set's 31 s.)
    @Test(arguments: Backend.all)
    func theCollectorGoesInBatchesAndInstancesTakeTurns(_ backend: Backend) async throws {
        try await TestDatabase.with(backend) { database in
            var settings = Fixture.configuration(database, tables: [Self.table()])
            settings.now = { Date().addingTimeInterval(7_200) }  // past the hour's retention
            let configuration = settings
            try await Fixture.withTableStore(configuration) { store in
                try await Self.seed(store, count: 130, deleted: 120)
                let one = try #require(TombstoneCollector(tables: store, configuration: configuration, batchSize: 50))
                #expect(one.interval == .seconds(360))
                #expect(TombstoneCollector(tables: store, configuration: Fixture.configuration(database)) == nil)
                guard backend == .postgres else {
                    #expect(try await one.collect() == 120)
                    return
                }
                try await Fixture.withTableStore(configuration) { other in
                    let two = try #require(
                        TombstoneCollector(tables: other, configuration: configuration, batchSize: 50))
                    async let first = one.collect()
                    async let second = two.collect()
                    let (a, b) = try await (first, second)
                    // The one that waited may find some left when the other let go between batches: none twice.
                    #expect(a + b + (try await one.collect()) == 120)
                }
            }
        }
    }

    @Test func theRetentionIsASoftDeleteTablesAndAtLeastASecond() throws {
        func tables(_ json: String) throws -> [TableConfiguration] {
            try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false)).tables
        }
        #expect(
            try tables(#"{"tables": [{"name": "Note", "tombstoneRetention": 86400}]}"#).first?.tombstoneRetention
                == .seconds(86_400))
        #expect(try tables(#"{"tables": [{"name": "Note"}]}"#).first?.tombstoneRetention == nil)
        #expect(
            try tables(#"{"tables": [{"name": "Note", "refuseStalePulls": true}]}"#).first?.refusesStalePulls == true)
        for (json, message) in [
            (#"{"tables": [{"name": "Note", "softDelete": false, "tombstoneRetention": 60}]}"#, "soft-delete table"),
            (#"{"tables": [{"name": "Note", "tombstoneRetention": 0}]}"#, "at least 1 second"),
            (#"{"tables": [{"name": "Note", "tombstoneRetention": "a day"}]}"#, "whole number"),
            (#"{"tables": [{"name": "Note", "refuseStalePulls": "yes"}]}"#, "refuseStalePulls"),
        ] {
            do {
                _ = try tables(json)
                Issue.record("\(json) was taken")
            } catch {
                #expect("\(error)".contains(message), "\(error)")
            }
        }
    }
}
