import HTTPTypes
import SyncCore
import SyncOData
import SyncSQL
import SyncSQLite
import Testing

@testable import SyncServer

/// Issue 50: tables whose ids the server assigns as integers (``TableConfiguration/integerIDs``, the Node.js
/// server's `autoIncrement: true`), as the Azure Mobile Apps E2E suites use them (`IntIdRoundTripTable`,
/// `intIdMovies`): inserts name no id and get the next number; paths, bodies and `$filter` speak numbers; an id is
/// never given twice; the v3 dialect refuses the table. On both stores.
@Suite(.timeLimit(.minutes(3))) struct IntegerIDTests {
    static func numbers(softDelete: Bool = true) throws -> TableConfiguration {
        var table = try TableConfiguration(name: "numbers", softDelete: softDelete, columns: ["name": .string])
        table.integerIDs = true
        return table
    }

    /// The ids of a reply's rows, as numbers.
    static func numbers(_ reply: Reply) -> [Int64] { reply.items.compactMap { $0["id"]?.intValue } }

    @Test(arguments: Backend.all) func insertsGetTheNextNumberAndEveryRouteSpeaksIt(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [try Self.numbers()]) { client in
            let first = try await client.send(.post, "/tables/numbers", json: ["name": "Hey"])
            #expect(first.status == .created)
            #expect(first.json?["id"] == .int(1))
            #expect(first["Location"]?.hasSuffix("/tables/numbers/1") == true)
            let second = try await client.send(.post, "/tables/numbers", json: ["id": 0, "name": "b"])
            #expect(second.json?["id"] == .int(2))
            let third = try await client.send(.post, "/tables/numbers", json: ["id": .null, "name": "c"])
            #expect(third.json?["id"] == .int(3))
            // An empty id is none too (the E2E suites' "Invalid id: empty").
            let fourth = try await client.send(.post, "/tables/numbers", json: ["id": "", "name": "d"])
            #expect(fourth.json?["id"] == .int(4))
            // An id of the client's own is refused: the server gives them.
            for id: JSONValue in ["a", 7, "7"] {
                let refused = try await client.send(.post, "/tables/numbers", json: ["id": id, "name": "x"])
                #expect(refused.status == .badRequest, "\(id)")
            }

            let read = try await client.send(.get, "/tables/numbers/1")
            #expect(read.status == .ok && read.json?["id"] == .int(1) && read.json?["name"] == "Hey")
            // A lookup of 0 or -1 fails (the E2E suites' "invalid offset" cases), text is no id.
            #expect(try await client.send(.get, "/tables/numbers/0").status == .notFound)
            #expect(try await client.send(.get, "/tables/numbers/-1").status == .notFound)
            #expect(try await client.send(.get, "/tables/numbers/abc").status == .badRequest)

            let version = try #require(read.json?["version"]?.stringValue)
            let changed = try await client.send(
                .patch, "/tables/numbers/1", json: ["id": 1, "name": "What?", "version": .string(version)])
            #expect(changed.status == .ok && changed.json?["id"] == .int(1) && changed.json?["name"] == "What?")
            // A conflict shows the stored row with its number.
            let stale = try await client.send(
                .patch, "/tables/numbers/1", json: ["name": "late", "version": .string(version)])
            #expect(stale.status == .conflict && stale.json?["id"] == .int(1) && stale.json?["name"] == "What?")

            let batch = try await client.send(
                .post, "/batch",
                json: ["requests": [["method": "PATCH", "url": "tables/numbers/2", "body": ["name": "B"]]]])
            let answer = batch.json?["responses"]?.arrayValue?.first
            #expect(answer?["status"] == 200 && answer?["body"]?["id"] == .int(2))

            let deleted = try await client.send(.delete, "/tables/numbers/4")
            #expect(deleted.status == .ok && deleted.json?["id"] == .int(4) && deleted.json?["deleted"] == true)
            let undeleted = try await client.send(.post, "/tables/numbers/4")
            #expect(undeleted.status == .ok && undeleted.json?["deleted"] == false)

            // The v3 dialect cannot hold integer ids: the table is refused there, with the way out.
            let v3 = try await client.send(
                .get, "/tables/numbers", headers: [HTTPField.Name("ZUMO-API-VERSION")!: "3.0.0"], versioned: false)
            #expect(v3.status == .badRequest && v3.error?.contains("ZUMO-API-VERSION 2.0.0") == true)
        }
    }

    /// Ids are compared as numbers, whatever their count of digits: `$orderby=id`, `gt`, `le`, a quoted id.
    @Test(arguments: Backend.all) func queriesCompareAndOrderIdsAsNumbers(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [try Self.numbers()]) { client in
            for index in 1...12 {
                _ = try await client.send(.post, "/tables/numbers", json: ["name": .string("n\(index)")])
            }
            let last = try await client.send(.get, "/tables/numbers?$orderby=id%20desc&$top=3")
            #expect(Self.numbers(last) == [12, 11, 10])
            let above = try await client.send(.get, "/tables/numbers?$filter=id%20gt%209&$orderby=id")
            #expect(Self.numbers(above) == [10, 11, 12])
            let below = try await client.send(.get, "/tables/numbers?$filter=(id%20le%202)%20or%20(10%20lt%20id)")
            #expect(Set(Self.numbers(below)) == [1, 2, 11, 12])
            // The JS client's refresh quotes a string id, not a number: both find the row.
            let quoted = try await client.send(.get, "/tables/numbers?$filter=id%20eq%20'5'")
            #expect(Self.numbers(quoted) == [5])
            #expect(Self.numbers(try await client.send(.get, "/tables/numbers?$filter=id%20eq%205")) == [5])
            #expect(Self.numbers(try await client.send(.get, "/tables/numbers?$filter=id%20gt%200")).count == 12)
            #expect(Self.numbers(try await client.send(.get, "/tables/numbers?$filter=id%20le%200")).isEmpty)
            #expect(Self.numbers(try await client.send(.get, "/tables/numbers?$select=id,name")).count == 12)
            // Text functions would see the stored digits: refused, as comparisons with other kinds of value are.
            for filter in ["startswith(id,'1')", "id%20eq%201.5", "id%20eq%20'x'", "id%20add%201%20eq%202"] {
                let refused = try await client.send(.get, "/tables/numbers?$filter=\(filter)")
                #expect(refused.status == .badRequest, "\(filter)")
            }
        }
    }

    /// An id is never given again: not after its row is deleted for good, nor the one of a failed insert.
    @Test(arguments: Backend.all) func anIdIsNeverGivenTwice(_ backend: Backend) async throws {
        try await Fixture.withServer(backend, tables: [try Self.numbers(softDelete: false)]) { client in
            _ = try await client.send(.post, "/tables/numbers", json: ["name": "a"])
            let second = try await client.send(.post, "/tables/numbers", json: ["name": "b"])
            #expect(second.json?["id"] == .int(2))
            #expect(try await client.send(.delete, "/tables/numbers/2").status == .ok)
            #expect(try await client.send(.get, "/tables/numbers/2").status == .notFound)
            // A refused insert (a number in a string column) took its id too.
            #expect(try await client.send(.post, "/tables/numbers", json: ["name": 5]).status == .badRequest)
            let next = try await client.send(.post, "/tables/numbers", json: ["name": "c"])
            #expect(next.json?["id"] == .int(4))
        }
    }

    /// A hook sees the id as the wire shows it, not as the store keeps it; a read hook's filter names ids as numbers,
    /// as a query does (it was compared with the stored digits, and hid every row).
    @Test func hooksSeeTheNumber() async throws {
        let seen = Locked<[String]>([])
        let hooks = TableHooks(
            read: { _ in TableView(filter: .binary(.le, .member("id"), .literal(.int(2)))) },
            beforeInsert: { write in seen.withLock { $0.append(write.id.rawValue) } })
        try await Fixture.withServer(
            .sqlite, tables: [try Self.numbers()], configure: { $0.hooks = ["numbers": hooks] }
        ) {
            client in
            for name in ["a", "b", "c"] {
                _ = try await client.send(.post, "/tables/numbers", json: ["name": .string(name)])
            }
            #expect(Self.numbers(try await client.send(.get, "/tables/numbers?$orderby=id")) == [1, 2])
            #expect(try await client.send(.get, "/tables/numbers/2").status == .ok)
            #expect(try await client.send(.get, "/tables/numbers/3").status == .notFound)
        }
        #expect(seen.withLock { $0 } == ["1", "2", "3"])
    }

    /// Seed rows keep their numbers; the next insert is above the largest.
    @Test(arguments: Backend.all) func seededNumbersComeBeforeTheNextInsert(_ backend: Backend) async throws {
        var table = try Self.numbers()
        table.seed = [["id": 5, "name": "five"], ["id": 7, "name": "seven"], ["name": "next"]]
        try await Fixture.withServer(backend, tables: [table]) { client in
            let seeded = try await client.send(.get, "/tables/numbers?$orderby=id")
            #expect(Self.numbers(seeded) == [5, 7, 8])
            let inserted = try await client.send(.post, "/tables/numbers", json: ["name": "after"])
            #expect(inserted.json?["id"] == .int(9))
        }
    }

    @Test func theConfigurationFileSpellsItAsTheNodeServerDoes() throws {
        let json = #"{"tables": [{"name": "IntIdRoundTripTable", "autoIncrement": true}, {"name": "plain"}]}"#
        let file = try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false))
        #expect(file.tables.map(\.integerIDs) == [true, false])
        var members = try TableConfiguration(name: "members")
        members.members = MembersTable(groupColumn: "list", userColumn: "user", roleColumn: "role")
        members.integerIDs = true
        #expect(throws: ConfigurationError.self) { try members.validate() }
    }
}
