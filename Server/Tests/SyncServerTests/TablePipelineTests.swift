import Foundation
import HTTPTypes
import SyncCore
import Testing

@testable import SyncServer

/// The table pipeline with no HTTP at all: a ``TableController`` over a real SQLite store, called with a
/// ``TableCall`` and a ``WriteRequest`` as a route would make them, and its answers read as values. Covers: the
/// access rule of the route's effect and of a further effect (a replace that deletes), the hooks (a change and a
/// refusal), a precondition failure as 412 or 409 with the row shown as the dialect shows it, an effect that is not
/// the route's (500).
@Suite(.timeLimit(.minutes(3))) struct TablePipelineTests {
    static let alice = Caller(subject: "alice", roles: [])
    static let admin = Caller(subject: "admin", roles: ["admin"])

    /// A controller of one `TodoItem` table whose deletes are the admins', and whose change hook upper-cases `text`
    /// and refuses the text "no".
    func withController(_ body: (TableController) async throws -> Void) async throws {
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
        let controller = TableController(
            store: store, maxBodySize: 1 << 20, queryLimits: QueryLimits(), makeID: { UUID().uuidString },
            authenticates: true, changes: ChangeHub(), stats: ServerStats(), hooks: ["todoitem": hooks])
        try await body(controller)
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

    @Test func aWriteIsDecidedWithoutHTTP() async throws {
        try await withController { controller in
            let (id, inserted) = try await controller.write(.insert, call(Self.alice)) { _, _ in
                WriteRequest(id: try ItemID("a"), action: .insert(["text": "milk"]))
            }
            #expect(id.rawValue == "a")
            let version = try #require(inserted["version"]?.stringValue)
            // The change hook ran on the change.
            let (_, changed) = try await controller.write(.change, call(Self.alice, item: "a")) { _, pathID in
                WriteRequest(
                    id: try TableController.item(pathID), action: .change(["text": "oat milk"]),
                    precondition: .version(Version(version)))
            }
            #expect(changed["text"] == "OAT MILK")
            // The hook's refusal is the answer.
            #expect(
                await status {
                    _ = try await controller.write(.change, call(Self.alice, item: "a")) { _, _ in
                        WriteRequest(id: try ItemID("a"), action: .change(["text": "no"]))
                    }
                } == .unprocessableContent)
            // A stale version: 412 for If-Match, 409 for a v2 body version, with the row as the dialect shows it.
            for (answer, expected) in [
                (WriteRequest.ConflictAnswer.preconditionFailed, HTTPResponse.Status.preconditionFailed),
                (.conflict, .conflict),
            ] {
                do {
                    _ = try await controller.write(.change, call(Self.alice, item: "a")) { _, _ in
                        var request = WriteRequest(
                            id: try ItemID("a"), action: .change(["text": "x"]),
                            precondition: .version(Version(version)))
                        request.conflictAnswer = answer
                        request.shown = { row in row["text"] ?? .null }
                        return request
                    }
                    Issue.record("a stale version was written")
                } catch let error as APIError {
                    #expect(error.status == expected)
                    #expect(error.body == "OAT MILK")
                }
            }
        }
    }

    @Test func theRulesOfEveryEffectHoldWithoutHTTP() async throws {
        try await withController { controller in
            _ = try await controller.write(.insert, call(Self.alice)) { _, _ in
                WriteRequest(id: try ItemID("a"), action: .insert(["text": "milk"]))
            }
            // No caller: 401 before the request is read; not an admin: 403.
            #expect(
                await status {
                    _ = try await controller.write(.delete, call(nil, item: "a")) { _, _ in
                        Issue.record("the request was read before the rule")
                        return WriteRequest(id: try ItemID("a"), action: .delete)
                    }
                } == .unauthorized)
            #expect(
                await status {
                    _ = try await controller.write(.delete, call(Self.alice, item: "a")) { _, _ in
                        WriteRequest(id: try ItemID("a"), action: .delete)
                    }
                } == .forbidden)
            // A replace that deletes is a delete too.
            #expect(
                await status {
                    _ = try await controller.write(.change, call(Self.alice, item: "a")) { _, _ in
                        WriteRequest(id: try ItemID("a"), action: .replace(["text": "milk", "deleted": true]))
                    }
                } == .forbidden)
            let (_, replaced) = try await controller.write(.change, call(Self.admin, item: "a")) { _, _ in
                WriteRequest(id: try ItemID("a"), action: .replace(["text": "milk", "deleted": true]))
            }
            #expect(replaced["deleted"] == true)
            // A route whose reader makes another effect's write is refused, whatever the caller may do.
            #expect(
                await status {
                    _ = try await controller.write(.change, call(Self.admin, item: "a")) { _, _ in
                        WriteRequest(id: try ItemID("a"), action: .undelete)
                    }
                } == .internalServerError)
        }
    }

    /// The v2 dialect's reading of a `PATCH`, as a value: what changes, and which precondition with which answer.
    @Test func aV2PatchReadsAsAChangeWithItsPrecondition() throws {
        let id = try ItemID("a")
        let body: [String: JSONValue] = ["id": "a", "text": "x", "deleted": true, "version": "v1"]
        let byBody = try TableController.v2Change(id: id, body: body, ifMatch: nil, includeDeleted: false)
        guard case .change(let fields) = byBody.action else { Issue.record("not a change"); return }
        #expect(fields["deleted"] == nil && fields["id"] == nil && fields["text"] == "x")
        #expect(byBody.precondition == .version(Version("v1")))
        #expect(byBody.conflictAnswer.status == .conflict)  // a body version fails as 409
        let byHeader = try TableController.v2Change(
            id: id, body: body, ifMatch: .version(Version("v2")), includeDeleted: true)
        #expect(byHeader.precondition == .version(Version("v2")))
        #expect(byHeader.conflictAnswer.status == .preconditionFailed)  // If-Match wins, as 412
        #expect(byHeader.includeDeleted)
        #expect(byHeader.effect == .change)
        let none = try TableController.v2Change(id: id, body: ["text": "x"], ifMatch: nil, includeDeleted: false)
        #expect(none.precondition == nil)
        #expect(throws: APIError.self) {
            try TableController.v2Change(id: id, body: ["version": 3], ifMatch: nil, includeDeleted: false)
        }
    }
}
