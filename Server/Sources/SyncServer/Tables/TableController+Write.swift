import HTTPTypes
import Hummingbird
import Logging
import SyncCore

/// A write to one row as the table pipeline runs it, whatever route or dialect spells it (v2 `POST`, `PATCH`,
/// `DELETE`, undelete; v3 `PUT`, `DELETE`; an operation of `/batch`, which goes through the same routes): each
/// dialect's handler reads its request into one of these, and ``TableController/write(_:_:_:)`` decides it — the
/// access rules of every ``WriteEffect`` it has, the caller's scope and group, the attachments, the hooks, the
/// store, the change notice — once, for every route.
struct WriteRequest: Sendable {
    /// What the write does to the row.
    enum Action: Sendable {
        /// A new row with these fields (its id is ``WriteRequest/id``).
        case insert([String: JSONValue])
        /// The fields given change, the others stay (v2 `PATCH`).
        case change([String: JSONValue])
        /// The row becomes these fields (v3 `PUT`): user fields left out become null, `deleted` is stored as given
        /// (absent: false) — so a replace may also delete the row or bring its tombstone back.
        case replace([String: JSONValue])
        /// The row becomes a tombstone (or goes, without soft delete).
        case delete
        /// The tombstone comes back.
        case undelete
    }

    /// How a failed precondition is answered: 412 (`If-Match`, v3's conditions) or 409 (a v2 body `version`).
    enum ConflictAnswer: Sendable {
        case preconditionFailed, conflict

        var status: HTTPResponse.Status { self == .conflict ? .conflict : .preconditionFailed }
    }

    var id: ItemID
    var action: Action
    /// The version the row must have.
    var precondition: Precondition?
    var conflictAnswer = ConflictAnswer.preconditionFailed
    /// Whether the write may reach a tombstone (`__includedeleted=true`).
    var includeDeleted = false
    /// A check of the stored row before anything else is decided (v3's 404, 410 and conditional headers): returns
    /// the precondition the write then carries and the row as checked.
    var checkStored: (@Sendable (TableController, TableSchema, RowScope) async throws -> (Precondition?, JSONValue))?
    /// How a row is shown in a conflict's body (the dialect's ``TableWire/shown(_:)``).
    var shown: @Sendable (JSONValue) -> JSONValue = { $0 }

    /// The effect whose access rule the route holds before the request is read.
    var effect: WriteEffect {
        switch action {
        case .insert: .insert
        case .change, .replace: .change
        case .delete: .delete
        case .undelete: .undelete
        }
    }
}

extension TableController {
    /// Runs a write through the pipeline: the table and the item id of the path, the access rule of `effect` (checked
    /// before `read` reads the request, so that a caller who may not write hears 401 or 403 whatever it sent), then the
    /// request as the dialect read it (given the table and the path's id) —
    /// the rules of its further effects (a replace that deletes: the delete rule), a replace's validation, the stored
    /// row's check, the caller's scope and group, the attachments, the hooks of every effect, the store (a precondition
    /// failure answered as the request says), and the notice to the table's followers.
    ///
    /// - Returns: The row's id and the row as stored.
    /// - Throws: ``APIError``.
    func write(
        _ effect: WriteEffect, _ call: TableCall,
        _ read: (TableSchema, ItemID?) async throws -> WriteRequest
    ) async throws -> (id: ItemID, item: JSONValue) {
        let schema = try await schema(call)
        let pathID = try pathID(call, schema)
        var scope = try await authorize(effect, schema, call)
        var request = try await read(schema, pathID)
        // Every field by its column's declared name, whatever case the client spelled it in (SQL Server-backed servers
        // match columns so): hooks, rules and the store see one spelling.
        switch request.action {
        case .insert(let given): request.action = .insert(try await perform { try schema.declaredNames(given) })
        case .change(let given): request.action = .change(try await perform { try schema.declaredNames(given) })
        case .replace(let given): request.action = .replace(try await perform { try schema.declaredNames(given) })
        case .delete, .undelete: break
        }
        // The rule checked is the write's own: a handler that reads another write than its route's is a bug.
        guard request.effect == effect else {
            call.logger.error("A \(effect) route read a \(request.effect) of \(schema.name)")
            throw APIError(.internalServerError, "The server failed the request")
        }
        let id = request.id
        var fields: [String: JSONValue] = [:]
        var stored: JSONValue?
        var precondition = request.precondition
        var deletes = false
        if case .replace(let given) = request.action {
            deletes = given[SystemProperty.deleted.rawValue]?.boolValue ?? false
            // A replace that deletes the row is a delete too: the delete rule holds, as for DELETE (issue 44: it
            // was authorized as an update alone).
            if deletes { try checkAccess(WriteEffect.delete, schema, call) }
            try Self.checkReplacedMember(given, schema)
            _ = try await perform { try schema.plan(given) }  // an invalid body is a 400 whatever the conditions say
        }
        if let checkStored = request.checkStored {
            (precondition, stored) = try await writing(id, schema, scope) { try await checkStored(self, schema, scope) }
        }
        switch request.action {
        case .insert(let given):
            fields = try scopedFields(given, scope, inserting: true)
            scope = try await checkGroup(fields, id: id, scope, schema: schema, inserting: true)
        case .change(let given), .replace(let given):
            fields = try scopedFields(given, scope, inserting: false)
            scope = try await checkGroup(fields, id: id, scope, schema: schema, inserting: false)
            if case .replace = request.action { fields = Self.replacement(fields, deletes: deletes, schema, scope) }
        case .delete, .undelete:
            break
        }
        // The hooks of every effect the write has (a replace: the change's, then the delete's or the undelete's).
        switch request.action {
        case .insert, .change, .replace:
            try await checkAttachments(fields, schema, call)
            fields = try await runHook(request.effect.hook, schema, id: id, fields: fields, call)
            if case .replace = request.action {
                if deletes {
                    _ = try await runHook(WriteEffect.delete.hook, schema, id: id, call)
                } else if stored?.isDeleted == true {
                    _ = try await runHook(WriteEffect.undelete.hook, schema, id: id, call)
                }
            }
        case .delete, .undelete:
            _ = try await runHook(request.effect.hook, schema, id: id, call)
        }
        let item = try await perform(
            table: schema.name, conflictStatus: request.conflictAnswer.status, shown: request.shown
        ) {
            switch request.action {
            case .insert:
                try await store.insert(fields, id: id, into: schema.name, scope: scope)
            case .change, .replace:
                // A replace reaches a tombstone only when asked: one deleted since the check is then a 404.
                try await writing(id, schema, scope) {
                    try await store.update(
                        id, with: fields, in: schema.name, scope: scope, precondition: precondition,
                        includeDeleted: request.includeDeleted)
                }
            case .delete:
                try await writing(id, schema, scope) {
                    try await store.delete(id, from: schema.name, scope: scope, precondition: precondition)
                }
            case .undelete:
                try await writing(id, schema, scope) {
                    try await store.undelete(id, in: schema.name, scope: scope, precondition: precondition)
                }
            }
        }
        changes.publish(Self.changeKey(schema, owner: scope.owner))
        return (id, item)
    }

    /// A members row names its member and role: a replace that leaves them out would store a member of no role (the
    /// group column, left out, stays as it is). 400 otherwise.
    static func checkReplacedMember(_ fields: [String: JSONValue], _ schema: TableSchema) throws {
        guard let members = schema.configuration.members else { return }
        for column in [members.userColumn, members.roleColumn] where (fields[column] ?? .null) == .null {
            throw APIError.badRequest("Invalid item: a replace of a member names its '\(column)'")
        }
    }

    /// What a replace stores: every user field the body leaves out becomes null, but for those the caller cannot see
    /// or write (the owner, claim or group column, hidden columns); the system properties are the server's, but for
    /// `deleted`, stored as the body gave it (`deletes`).
    static func replacement(_ given: [String: JSONValue], deletes: Bool, _ schema: TableSchema, _ scope: RowScope)
        -> [String: JSONValue]
    {
        var fields = given
        let kept = [schema.configuration.scopeColumn, schema.configuration.groupColumn].compactMap { $0 }
        for column in schema.columns.keys where fields[column] == nil && !kept.contains(column) && !scope.hides(column)
        {
            fields[column] = .null
        }
        for property in SystemProperty.allCases where property != .deleted { fields[property.rawValue] = nil }
        fields[SystemProperty.deleted.rawValue] = .bool(deletes)
        return fields
    }
}
