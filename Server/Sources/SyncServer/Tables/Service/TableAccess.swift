import HTTPTypes
import SyncCore
import SyncOData

/// Who may do what to which rows: the table a call names, the item of its path, the table's access rule for an
/// operation, and the caller's scope — the rows a per-user, claim- or membership-scoped table lets them see and
/// change, as the read hook's view narrows them. The table service asks it before anything else.
struct TableAccess: Sendable {
    let store: any TableStore
    /// Whether the server checks tokens (then tables need signed-in callers unless configured otherwise).
    let authenticates: Bool
    let hooks: HookRunner
    let groups: GroupRules

    /// The table the call names: 400 for an invalid name, 404 for one not served, 400 for a table of integer ids
    /// under v3.
    func schema(_ call: TableCall) async throws -> TableSchema {
        let name: TableName
        do { name = try TableName(call.table) } catch { throw APIError.badRequest("\(error)") }
        guard let schema = try await store.schema(of: name) else {
            throw APIError(.notFound, TableStoreError.unknownTable(name).description)
        }
        if schema.configuration.integerIDs, call.dialect == .v3 {
            throw APIError.badRequest(
                "\(schema.name) has integer ids, which Datasync clients cannot hold: call it with ZUMO-API-VERSION 2.0.0"
            )
        }
        return schema
    }

    /// The item id the call's path names, nil on a table's URL: 400 when it is not an id. In a table of integer ids,
    /// the stored form of the number (a number that is not positive: 404).
    func pathID(_ call: TableCall, _ schema: TableSchema) throws -> ItemID? {
        guard let raw = call.item else { return nil }
        guard let text = ODataQuery.percentDecode(raw) else {
            throw APIError.badRequest("Invalid item id: bad percent-encoding")
        }
        if schema.configuration.integerIDs {
            guard let id = try IntegerIDs.stored(path: text) else {
                throw APIError(.notFound, TableStoreError.notFound.description)
            }
            return id
        }
        do { return try ItemID(text) } catch { throw APIError.badRequest("\(error)") }
    }

    /// Checks that the caller may do `operation` on the table (401, 403 or 405 otherwise, or the read hook's
    /// refusal), and returns the rows the caller may see and change: a per-user table's owned by the caller's
    /// subject, a claim-scoped table's of the caller's claim, a membership-scoped table's of the groups the caller may
    /// read (for a read) or write, those the read hook's filter passes, without its hidden columns.
    func authorize(_ operation: TableOperation, _ schema: TableSchema, _ call: TableCall) async throws -> RowScope {
        let configuration = schema.configuration
        try checkAccess(operation, schema, call)
        let view = try await hooks.view(schema.name, call)
        var scope = RowScope(
            owner: configuration.perUser ? call.caller?.subject : nil, filter: view.filter,
            hiddenColumns: view.hiddenColumns)
        if let claimScope = configuration.claimScope {
            let claimed = call.caller?.claims[claimScope.claim]
            guard let value = claimed?.stringValue ?? claimed?.intValue.map(String.init) else {
                throw APIError(
                    .forbidden,
                    "Your token has no '\(claimScope.claim)' claim, which \(schema.name)'s rows are scoped by",
                    reason: .forbidden)
            }
            let mine = ODataExpression.binary(.eq, .member(claimScope.column), .literal(.string(value)))
            scope.filter = scope.filter.map { .binary(.and, mine, $0) } ?? mine
            scope.stamped[claimScope.column] = .string(value)
        }
        scope.membership = try await groups.membership(operation, schema, call)
        return scope
    }

    /// Checks the table's access rule for `operation` (401, 403, or 405 listing the methods the table allows).
    func checkAccess(_ operation: TableOperation, _ schema: TableSchema, _ call: TableCall) throws {
        let configuration = schema.configuration
        let methods: [(HTTPRequest.Method, TableOperation)] =
            call.item != nil
            ? [(.get, .read), (.patch, .update), (.delete, .delete), (.post, .update)]
            : [(.get, .read), (.post, .insert)]
        try Authorization.check(
            configuration.access(operation, authenticates: authenticates), caller: call.caller,
            what: "\(Self.verbs[operation]!) \(schema.name)",
            allowed: methods.filter { configuration.access($0.1, authenticates: authenticates) != .disabled }.map(\.0))
    }

    /// What a caller's write stores: the fields without those for hidden columns (the caller may not write them; the
    /// write hooks, which run after, may), and with the values its scope sets (a claim scope's column: on insert; a
    /// write that gives another value would move the row out of the caller's scope, and is refused, 403).
    func scopedFields(_ fields: [String: JSONValue], _ scope: RowScope, inserting: Bool) throws -> [String: JSONValue] {
        var fields = scope.hiddenColumns.isEmpty ? fields : fields.filter { !scope.hides($0.key) }
        for (column, value) in scope.stamped {
            if let given = fields[column], given != value {
                throw APIError(
                    .forbidden, "'\(column)' is \(value.serialized()) for you: a row cannot be moved out of your scope",
                    reason: .forbidden)
            }
            if inserting { fields[column] = value }
        }
        return fields
    }

    private static let verbs: [TableOperation: String] = [
        .read: "Reading", .insert: "Inserting into", .update: "Updating", .delete: "Deleting from",
    ]
}
