import HTTPTypes
import Logging
import Metrics
import SyncCore
import SyncOData
import SyncSQLite

/// The tables as a service, with no HTTP in it: a caller (``TableCall``) reads an item, queries a table or writes a
/// row (``WriteRequest``), and every rule is decided here, once, whatever route or dialect spelled the call — the
/// table's access rule (``TableAccess``), the caller's scope and group (``GroupRules``), the files a write names
/// (``AttachmentRules``), the app's hooks (``HookRunner``), the store, and the notice to the table's followers
/// (``ChangeHub``). Errors are ``APIError``s; a wire turns them and the results into its dialect's responses.
///
/// A call is two steps, so that a caller who may not do something hears 401 or 403 whatever they sent: ``target(_:_:)``
/// checks the access rule, then the wire reads the request into a value, then ``write(_:to:as:)``, ``item(in:id:includeDeleted:goneWhenDeleted:)``
/// or ``query(_:in:shape:)`` runs it.
struct TableService: Sendable {
    private(set) var store: any TableStore
    private(set) var access: TableAccess
    private(set) var attachments: AttachmentRules
    /// In an atomic set (``inSet(_:holding:)``), the change keys its writes publish once the set commits.
    private var heldKeys: Locked<Set<String>>?
    /// Wakes the `GET /changes` requests that follow a table when a write to it commits.
    let changes: ChangeHub
    /// This instance's counts, for the console.
    let stats: ServerStats
    let queryLimits: QueryLimits
    let makeID: @Sendable () -> String

    init(
        store: any TableStore, authenticates: Bool, hooks: [String: TableHooks] = [:],
        attachments: AttachmentFiles? = nil,
        groupedTables: [String: [GroupClaim.GroupedTable]] = [:], changes: ChangeHub, stats: ServerStats,
        queryLimits: QueryLimits, makeID: @escaping @Sendable () -> String
    ) {
        self.store = store
        access = TableAccess(
            store: store, authenticates: authenticates, hooks: HookRunner(hooks: hooks),
            groups: GroupRules(store: store, groupedTables: groupedTables))
        self.attachments = AttachmentRules(tables: store, access: access, files: attachments)
        self.changes = changes
        self.stats = stats
        self.queryLimits = queryLimits
        self.makeID = makeID
    }

    var groups: GroupRules { access.groups }
    var hooks: HookRunner { access.hooks }

    /// The service as an atomic set of writes runs it (``TableStore/atomically(_:)``): every store call on `set`, the
    /// set's store, and the keys its writes change held in `keys` — a follower woken before the commit would read none
    /// of the set, and not be woken again — for the caller to publish once the set has committed.
    func inSet(_ set: any TableStore, holding keys: Locked<Set<String>>) -> TableService {
        var service = self
        service.store = set
        service.access = TableAccess(
            store: set, authenticates: access.authenticates, hooks: access.hooks,
            groups: GroupRules(store: set, groupedTables: groups.groupedTables))
        service.attachments = AttachmentRules(tables: set, access: service.access, files: attachments.files)
        service.heldKeys = keys
        return service
    }

    // MARK: Access

    /// The table and item the call names, once the access rule of `effect` (nil: a read) holds: 400, 404 for what is
    /// not served, 401, 403 or 405 for the rule.
    func target(_ effect: WriteEffect?, _ call: TableCall) async throws -> TableTarget {
        let schema = try await access.schema(call)
        let pathID = try access.pathID(call, schema)
        let scope = try await access.authorize(effect?.operation ?? .read, schema, call)
        return TableTarget(effect: effect, schema: schema, pathID: pathID, scope: scope)
    }

    // MARK: Reads

    /// The item the target's path names: 404 when missing; a tombstone is 404 too (`goneWhenDeleted`: 410, as v3
    /// answers) unless `includeDeleted`.
    func item(in target: TableTarget, id: ItemID, includeDeleted: Bool, goneWhenDeleted: Bool) async throws
        -> JSONValue
    {
        let schema = target.schema
        let stored = try await perform {
            try await store.item(id, in: schema.name, scope: target.scope, includeDeleted: true)
        }
        let missing = APIError(.notFound, TableStoreError.notFound.description)
        guard let stored else { throw missing }
        if stored.isDeleted, schema.configuration.softDelete, !includeDeleted {
            guard goneWhenDeleted else { throw missing }
            throw APIError(.gone, "The item is deleted; send __includedeleted=true to read or change it")
        }
        return stored
    }

    /// Refuses a query past the server's cost limits (400, `query_cost`).
    func checkCost(_ query: ODataQuery) throws {
        if let refusal = queryLimits.refusal(query) { throw APIError.badRequest(refusal, reason: .queryCost) }
    }

    /// A page of the target table's rows within the caller's scope, in `shape`, with the caller's scope token
    /// (``GroupRules/scopeToken(_:schema:)``, taken before the page is read) and, for a pull that changes alone
    /// cannot answer since tombstones were removed, the table's horizon (``PullHorizon``, read after the page). 400 for
    /// a query past the limits or a `$top` past the table's; 410 for an incremental pull older than the horizon, from a
    /// client that does not say it `reconciles`, of a table that refuses such pulls
    /// (``TableConfiguration/refusesStalePulls``).
    func query(_ query: ODataQuery, in target: TableTarget, shape: RowShape, reconciles: Bool = true) async throws
        -> (page: QueryPage, scopeToken: String?, horizon: WireDate?)
    {
        try checkCost(query)
        let schema = target.schema
        let configuration = schema.configuration
        if let top = query.top, top > configuration.maxTop {
            throw APIError.badRequest("$top: you cannot request more than \(configuration.maxTop) records")
        }
        let limit = min(query.top ?? configuration.pageSize, configuration.pageSize)
        let token = try await groups.scopeToken(target.scope, schema: schema)
        let page = try await perform {
            try await store.query(
                schema.name, query, scope: target.scope, limit: limit, maxBytes: queryLimits.maxPageBytes, shape: shape)
        }
        if !reconciles, configuration.refusesStalePulls, PullHorizon.isStale(query, horizon: page.horizon) {
            throw APIError(
                .gone,
                "This device's copy of \(schema.name) is older than the deletes the server still remembers (its "
                    + "tombstones were removed after \(configuration.tombstoneRetention.map { "\($0.components.seconds)" } ?? "?") s): "
                    + "clear the table's local data and pull it again")
        }
        Counter(label: MetricLabel.rowsReturned, dimensions: [(MetricLabel.table, schema.name.canonical)])
            .increment(by: page.itemCount)
        stats.record { $0.rowsReturned += page.itemCount }
        return (page, token, PullHorizon.behind(query, horizon: page.horizon))
    }

    // MARK: Writes

    /// Runs a write whose target's rule holds: the fields by their declared names, the rules of its further effects
    /// (a replace that deletes: the delete rule), a replace's validation, the stored row's check, the caller's scope
    /// and group, the attachments, the hooks of every effect, the store (a precondition failure answered as the
    /// request says), and the notice to the table's followers.
    ///
    /// - Returns: The row's id and the row as stored.
    /// - Throws: ``APIError``; a request of another effect than the target's is a 500 (a wire's bug).
    func write(_ request: WriteRequest, to target: TableTarget, as call: TableCall) async throws -> (
        id: ItemID, item: JSONValue
    ) {
        let schema = target.schema
        var request = request
        request.action = try await declared(request.action, schema)
        // The rule checked is the write's own: a wire that reads another write than its route's is a bug.
        guard request.effect == target.effect else {
            call.logger.error(
                "A \(target.effect.map { "\($0)" } ?? "read") route read a \(request.effect) of \(schema.name)")
            throw APIError(.internalServerError, "The server failed the request")
        }
        let id: ItemID
        if let given = request.id { id = given } else { id = try await newID(schema) }
        if case .insert = request.action, request.id != nil, let floor = request.resendFloor {
            try await checkResend(id, since: floor, in: target)
        }
        var deletes = false
        if case .replace(let given) = request.action {
            deletes = given[SystemProperty.deleted.rawValue]?.boolValue ?? false
            try await checkReplace(given, deletes: deletes, schema, call)
        }
        var stored: JSONValue?
        if let conditions = request.storedCheck {
            let checked = request
            (request.precondition, stored) = try await groups.writing(id, schema, target.scope) {
                try await checkStored(conditions, checked, id: id, in: target)
            }
        }
        let (fields, scope) = try await scoped(request.action, id: id, deletes: deletes, target.scope, schema)
        let written = try await runHooks(request, fields, id: id, deletes: deletes, stored: stored, schema, call)
        let item = try await storeWrite(request, written, id: id, scope: scope, schema)
        let key = Self.changeKey(schema, owner: scope.owner)
        if let heldKeys { heldKeys.withLock { _ = $0.insert(key) } } else { changes.publish(key) }
        return (id, item)
    }

    /// Refuses (410) an insert sent again after a lost reply (``WriteRequest/resendFloor``) when the table has no trace
    /// of the item and may have removed its tombstone (``TableStore/removedTrace(of:in:since:)``): its first send may
    /// have landed and the item been deleted since. The client shows it as a conflict rather than bring a deleted item
    /// back (docs/retention.md).
    private func checkResend(_ id: ItemID, since floor: WireDate, in target: TableTarget) async throws {
        let table = target.schema.name
        let gone = try await perform {
            try await store.item(id, in: table, scope: target.scope, includeDeleted: true) == nil
                ? try await store.removedTrace(of: id, in: table, since: floor) : false
        }
        guard gone else { return }
        throw APIError(
            .gone,
            "\(id) may have been deleted after this insert was first sent, and \(table) no longer keeps its "
                + "tombstone. Resolve it as a conflict: keep it to insert it again")
    }

    /// An insert's new id: one of `makeID`, or in a table of integer ids, the store's next.
    func newID(_ schema: TableSchema) async throws -> ItemID {
        guard schema.configuration.integerIDs else { return try ItemID(makeID()) }
        return try IntegerIDs.stored(try await perform { try await store.nextIntegerID(in: schema.name) })
    }

    /// Every field by its column's declared name, whatever case the client spelled it in (SQL Server-backed servers
    /// match columns so): hooks, rules and the store see one spelling.
    private func declared(_ action: WriteRequest.Action, _ schema: TableSchema) async throws -> WriteRequest.Action {
        switch action {
        case .insert(let given): .insert(try await perform { try schema.declaredNames(given) })
        case .change(let given): .change(try await perform { try schema.declaredNames(given) })
        case .replace(let given): .replace(try await perform { try schema.declaredNames(given) })
        case .delete, .undelete: action
        }
    }

    /// A replace's own checks: one that deletes the row is a delete too (the delete rule holds, as for DELETE; issue
    /// 44: it was authorized as an update alone), a member keeps its user and role, and an invalid body is a 400
    /// whatever the conditions say.
    private func checkReplace(_ given: [String: JSONValue], deletes: Bool, _ schema: TableSchema, _ call: TableCall)
        async throws
    {
        if deletes { try access.checkAccess(WriteEffect.delete.operation, schema, call) }
        try Self.checkReplacedMember(given, schema)
        _ = try await perform { try schema.plan(given) }
    }

    /// The stored row a conditional write reaches (v3): 404 when missing, 410 for a tombstone unless the request
    /// includes deleted rows, 412 with the row when a condition fails.
    ///
    /// - Returns: The write's precondition — with `If-Match`, the version just checked, so that a write between the
    ///   check and this one is a 412 too; nil without — and the row as checked.
    private func checkStored(_ conditions: ItemConditions, _ request: WriteRequest, id: ItemID, in target: TableTarget)
        async throws -> (Precondition?, JSONValue)
    {
        let stored = try await item(
            in: target, id: id, includeDeleted: request.includeDeleted, goneWhenDeleted: true)
        let verdict = conditions.verdict(on: stored)
        if verdict.matchFails || verdict.notModified || verdict.unmodifiedFails {
            countConflict(target.schema.name)
            throw APIError(conflict: .preconditionFailed, storedItem: request.shown(stored))
        }
        guard conditions.ifMatch != nil, let version = stored.version else { return (nil, stored) }
        return (.version(version), stored)
    }

    /// The fields the caller's write stores (``TableAccess/scopedFields(_:_:inserting:)``), with the scope of the
    /// write once its group is checked (``GroupRules/checkGroup(_:id:_:schema:inserting:)``); a replace's, with the
    /// fields it leaves out.
    private func scoped(
        _ action: WriteRequest.Action, id: ItemID, deletes: Bool, _ scope: RowScope, _ schema: TableSchema
    ) async throws -> ([String: JSONValue], RowScope) {
        switch action {
        case .insert(let given):
            let fields = try access.scopedFields(given, scope, inserting: true)
            return (fields, try await groups.checkGroup(fields, id: id, scope, schema: schema, inserting: true))
        case .change(let given), .replace(let given):
            var fields = try access.scopedFields(given, scope, inserting: false)
            let scope = try await groups.checkGroup(fields, id: id, scope, schema: schema, inserting: false)
            if case .replace = action { fields = Self.replacement(fields, deletes: deletes, schema, scope) }
            return (fields, scope)
        case .delete, .undelete:
            return ([:], scope)
        }
    }

    /// The files the fields name, then the hooks of every effect the write has (a replace: the change's, then the
    /// delete's or the undelete's); the fields to store.
    private func runHooks(
        _ request: WriteRequest, _ fields: [String: JSONValue], id: ItemID, deletes: Bool, stored: JSONValue?,
        _ schema: TableSchema, _ call: TableCall
    ) async throws -> [String: JSONValue] {
        switch request.action {
        case .insert, .change, .replace:
            try await attachments.check(fields, schema, call)
            let fields = try await hooks.run(request.effect.hook, schema, id: id, fields: fields, call)
            if case .replace = request.action {
                if deletes {
                    _ = try await hooks.run(WriteEffect.delete.hook, schema, id: id, call)
                } else if stored?.isDeleted == true {
                    _ = try await hooks.run(WriteEffect.undelete.hook, schema, id: id, call)
                }
            }
            return fields
        case .delete, .undelete:
            _ = try await hooks.run(request.effect.hook, schema, id: id, call)
            return fields
        }
    }

    /// The store's write; a replace reaches a tombstone only when asked (one deleted since the check is then a 404).
    private func storeWrite(
        _ request: WriteRequest, _ fields: [String: JSONValue], id: ItemID, scope: RowScope, _ schema: TableSchema
    ) async throws -> JSONValue {
        let precondition = request.precondition
        return try await perform(
            table: schema.name, conflictStatus: request.conflictAnswer.status, shown: request.shown
        ) {
            switch request.action {
            case .insert:
                return try await store.insert(fields, id: id, into: schema.name, scope: scope)
            case .change, .replace:
                return try await groups.writing(id, schema, scope) {
                    try await store.update(
                        id, with: fields, in: schema.name, scope: scope, precondition: precondition,
                        includeDeleted: request.includeDeleted)
                }
            case .delete:
                return try await groups.writing(id, schema, scope) {
                    try await store.delete(id, from: schema.name, scope: scope, precondition: precondition)
                }
            case .undelete:
                return try await groups.writing(id, schema, scope) {
                    try await store.undelete(id, in: schema.name, scope: scope, precondition: precondition)
                }
            }
        }
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

    // MARK: The store's errors

    /// Runs a store call, its errors as API errors (``TableStoreError/apiError(conflictStatus:shown:)``), counting
    /// conflicts.
    func perform<T>(
        table: TableName? = nil, conflictStatus: HTTPResponse.Status = .preconditionFailed,
        shown: (JSONValue) -> JSONValue = { $0 }, _ body: () async throws -> T
    ) async throws -> T {
        try await mappingStoreErrors(
            conflictStatus: conflictStatus, shown: shown, onConflict: { countConflict(table) }, body)
    }

    func countConflict(_ table: TableName?) {
        Counter(label: MetricLabel.conflicts, dimensions: [(MetricLabel.table, table?.canonical ?? "unknown")])
            .increment()
        stats.record { $0.conflicts += 1 }
    }

    /// The key a write publishes and a follower waits on: the table, or the table and owner of a per-user row
    /// (so that one user's writes do not wake another's followers).
    static func changeKey(_ schema: TableSchema, owner: String?) -> String {
        owner.map { "\(schema.name.canonical)/\($0)" } ?? schema.name.canonical
    }
}

/// Metric labels and dimensions, declared once.
enum MetricLabel {
    static let rowsReturned = "sync.rows.returned"
    static let conflicts = "sync.conflicts"
    static let table = "sync.table"
    static let refusals = "sync.refusals"
    static let reason = "sync.reason"
}
