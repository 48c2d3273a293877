import HTTPTypes
import Logging
import SyncCore

/// The app's table hooks (``TableHooks``), run as the table service needs them: a hook's ``RequestRefusal`` is the
/// answer; anything else it throws, or a write hook that changes a system property, is a 500 with the cause logged.
struct HookRunner: Sendable {
    /// The tables' hooks, by canonical table name.
    var hooks: [String: TableHooks] = [:]

    /// The table's view for the caller: the read hook's answer, or the whole table without one.
    ///
    /// - Throws: ``APIError``: the hook's refusal, or 500 when it throws anything else.
    func view(_ table: TableName, _ call: TableCall) async throws -> TableView {
        guard let hook = hooks[table.canonical]?.read else { return .everything }
        do {
            return try await hook(TableRead(table: table, caller: call.caller))
        } catch let refusal as RequestRefusal {
            throw refusal.apiError
        } catch {
            call.logger.error("The read hook of \(table) failed: \(error)")
            throw APIError(.internalServerError, "The server failed the request", reason: .hookFailed)
        }
    }

    /// Runs the table's hook for `kind`, if it has one, and returns the fields to write.
    ///
    /// - Throws: ``APIError``: the hook's refusal, or 500 when it throws anything else or changes a system property.
    func run(
        _ kind: TableWrite.Kind, _ schema: TableSchema, id: ItemID, fields: [String: JSONValue] = [:],
        _ call: TableCall
    ) async throws -> [String: JSONValue] {
        guard let hook = hooks[schema.name.canonical]?.hook(kind) else { return fields }
        let shown = schema.configuration.integerIDs ? try ItemID(IntegerIDs.shownText(id.rawValue)) : id
        var write = TableWrite(kind: kind, table: schema.name, id: shown, caller: call.caller, fields: fields)
        do {
            try await hook(&write)
        } catch let refusal as RequestRefusal {
            throw refusal.apiError
        } catch {
            call.logger.error("The \(kind.rawValue) hook of \(schema.name) failed: \(error)")
            throw APIError(.internalServerError, "The server failed the request", reason: .hookFailed)
        }
        for property in SystemProperty.allCases where write.fields[property.rawValue] != fields[property.rawValue] {
            call.logger.error("The \(kind.rawValue) hook of \(schema.name) changed '\(property.rawValue)'")
            throw APIError(.internalServerError, "The server failed the request", reason: .hookFailed)
        }
        return write.fields
    }
}
