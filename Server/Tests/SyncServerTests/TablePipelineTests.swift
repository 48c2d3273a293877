import Foundation
import HTTPTypes
import SyncCore
import Testing

@testable import SyncServer

/// The table service with no HTTP at all: a ``TableService`` over a real SQLite store, called with a ``TableCall`` and
/// a ``WriteRequest`` as a wire would make them, and its answers read as values. Covers: the
/// access rule of the route's effect and of a further effect (a replace that deletes), the hooks (a change and a
/// refusal), a precondition failure as 412 or 409 with the row shown as the dialect shows it, an effect that is not
/// the route's (500).
@Suite(.timeLimit(.minutes(3))) struct TablePipelineTests {
    static let alice = Caller(subject: "alice", roles: [])
    static let admin = Caller(subject: "admin", roles: ["admin"])

    /// A service of one `TodoItem` table whose deletes are the admins', and whose change hook upper-cases `text`
    /// and refuses the text "no".
    func withService(_ body: (TableService) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteTableStore(path: directory.appendingPathComponent("tables.sqlite").path)
        var table = try TableConfiguration(name: "TodoItem")
        table.access[.delete] = .restricted(subjects: [], roles: ["admin"])
        try await store.prepare([table])
        let hooks = TableHooks(beforeUpdate: { write in
            guard let text = write.fields["text"]?.stringValue else { return }
            if text == "no" { throw RequestRefusal(.unprocessableContent, "not that") }
            write.fields["text"] = .string(text.uppercased())
        })
        let service = TableService(
            store: store, authenticates: true, hooks: ["todoitem": hooks], changes: ChangeHub(), stats: ServerStats(),
            queryLimits: QueryLimits(), makeID: { UUID().uuidString })
        try await body(service)
    }

    func call(_ caller: Caller?, item: String? = nil) -> TableCall {
        TableCall(caller: caller, table: "TodoItem", item: item, logger: .silent)
    }

    /// The status of the API error `body` throws (nil when it throws none).
    func status(_ body: () async throws -> Void) async -> HTTPResponse.Status? {
        do {
            try await body()
            return nil
        } catch let error as APIError {
            return error.status
        } catch {
            return .internalServerError
        }
    }

    /// A write as a route makes it: the target of `effect` (the access rule), then the request.
    func write(_ service: TableService, _ effect: WriteEffect, _ call: TableCall, _ request: WriteRequest)
        async throws -> (id: ItemID, item: JSONValue)
    {
        try await service.write(request, to: try await service.target(effect, call), as: call)
    }

    @Test func aWriteIsDecidedWithoutHTTP() async throws {
        try await withService { service in
            let (id, inserted) = try await write(
                service, .insert, call(Self.alice), WriteRequest(id: try ItemID("a"), action: .insert(["text": "milk"]))
            )
            #expect(id.rawValue == "a")
            let version = try #require(inserted["version"]?.stringValue)
            // An insert without an id gets one of the service's.
            let (made, _) = try await write(
                service, .insert, call(Self.alice), WriteRequest(id: nil, action: .insert(["text": "eggs"])))
            #expect(!made.rawValue.isEmpty && made.rawValue != "a")
            // The change hook ran on the change.
            let target = try await service.target(.change, call(Self.alice, item: "a"))
            let (_, changed) = try await service.write(
                WriteRequest(
                    id: try target.item(), action: .change(["text": "oat milk"]),
                    precondition: .version(Version(version))),
                to: target, as: call(Self.alice, item: "a"))
            #expect(changed["text"] == "OAT MILK")
            // The hook's refusal is the answer.
            #expect(
                await status {
                    _ = try await write(
                        service, .change, call(Self.alice, item: "a"),
                        WriteRequest(id: try ItemID("a"), action: .change(["text": "no"])))
                } == .unprocessableContent)
            // A stale version: 412 for If-Match, 409 for a v2 body version, with the row as the dialect shows it.
            for (answer, expected) in [
                (WriteRequest.ConflictAnswer.preconditionFailed, HTTPResponse.Status.preconditionFailed),
                (.conflict, .conflict),
            ] {
                var request = WriteRequest(
                    id: try ItemID("a"), action: .change(["text": "x"]), precondition: .version(Version(version)))
                request.conflictAnswer = answer
                request.shown = { row in row["text"] ?? .null }
                do {
                    _ = try await write(service, .change, call(Self.alice, item: "a"), request)
                    Issue.record("a stale version was written")
                } catch let error as APIError {
                    #expect(error.status == expected)
                    #expect(error.body == "OAT MILK")
                }
            }
        }
    }

    /// A conditional write (v3's) as data: the stored row's check is the service's, with no request behind it.
    @Test func aConditionalWriteIsCheckedAgainstTheStoredRow() async throws {
        try await withService { service in
            let (_, inserted) = try await write(
                service, .insert, call(Self.admin), WriteRequest(id: try ItemID("a"), action: .insert(["text": "milk"]))
            )
            let version = try #require(inserted.version)
            var stale = WriteRequest(id: try ItemID("a"), action: .replace(["text": "tea"]))
            stale.storedCheck = ItemConditions(ifMatch: "\"not-\(version.rawValue)\"")
            stale.shown = { $0.removing([.createdAt]) }
            do {
                _ = try await write(service, .change, call(Self.admin, item: "a"), stale)
                Issue.record("a write whose If-Match names another version was applied")
            } catch let error as APIError {
                #expect(error.status == .preconditionFailed)
                #expect(error.body["createdAt"] == nil && error.body["text"] == "milk")
            }
            var current = stale
            current.storedCheck = ItemConditions(ifMatch: version.entityTag)
            let (_, replaced) = try await write(service, .change, call(Self.admin, item: "a"), current)
            #expect(replaced["text"] == "TEA")  // the change hook ran on the replace
            // A tombstone is 410 to a conditional write that does not include deleted rows, 404 when missing.
            _ = try await write(
                service, .delete, call(Self.admin, item: "a"), WriteRequest(id: try ItemID("a"), action: .delete))
            var again = WriteRequest(id: try ItemID("a"), action: .delete)
            again.storedCheck = ItemConditions()
            #expect(await status { _ = try await write(service, .delete, call(Self.admin, item: "a"), again) } == .gone)
            again.id = try ItemID("b")
            #expect(
                await status { _ = try await write(service, .delete, call(Self.admin, item: "b"), again) } == .notFound)
        }
    }

    @Test func theRulesOfEveryEffectHoldWithoutHTTP() async throws {
        try await withService { service in
            _ = try await write(
                service, .insert, call(Self.alice), WriteRequest(id: try ItemID("a"), action: .insert(["text": "milk"]))
            )
            // No caller: 401 at the target, before any request is read; not an admin: 403.
            #expect(await status { _ = try await service.target(.delete, call(nil, item: "a")) } == .unauthorized)
            #expect(await status { _ = try await service.target(.delete, call(Self.alice, item: "a")) } == .forbidden)
            // A replace that deletes is a delete too.
            #expect(
                await status {
                    _ = try await write(
                        service, .change, call(Self.alice, item: "a"),
                        WriteRequest(id: try ItemID("a"), action: .replace(["text": "milk", "deleted": true])))
                } == .forbidden)
            let (_, replaced) = try await write(
                service, .change, call(Self.admin, item: "a"),
                WriteRequest(id: try ItemID("a"), action: .replace(["text": "milk", "deleted": true])))
            #expect(replaced["deleted"] == true)
            // A wire that makes another effect's write than its target's is refused, whatever the caller may do.
            #expect(
                await status {
                    _ = try await write(
                        service, .change, call(Self.admin, item: "a"),
                        WriteRequest(id: try ItemID("a"), action: .undelete))
                } == .internalServerError)
        }
    }
}
