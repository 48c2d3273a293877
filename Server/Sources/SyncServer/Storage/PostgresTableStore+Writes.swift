import Logging
import PostgresNIO
public import SyncCore
import SyncSQL

// Every write is one statement that takes its stamp from the table's row in `__sync_tables`:
//
//     WITH "__stamp" AS (UPDATE "__sync_tables" SET "lastStamp" = GREATEST($1, "lastStamp" + 1)
//                      WHERE "name" = $2 RETURNING "lastStamp")
//     INSERT INTO "todoitem" (…) SELECT …, "__stamp"."lastStamp", … FROM "__stamp" … RETURNING *
//
// The bookkeeping row stays locked until the statement commits, so writes to one table commit one
// after another in stamp order, on every instance (docs/postgres-cursor.md). A single statement
// holds that lock for no network round trip at all. Writes that change a dynamic table's schema
// take the longer path: a transaction that locks the table, then the row, then alters the table —
// the table before the row, as a one-statement write takes them.
//
// A per-user table takes its stamps from the owner's row in `__sync_owner_stamps` instead (`$3` is the
// owner): each user's writes commit in stamp order, which is all a reader — who sees only their own
// rows — needs, and users never wait for each other.

extension PostgresTableStore {
    public func insert(_ fields: [String: JSONValue], id: ItemID, into table: TableName, scope: RowScope) async throws
        -> JSONValue
    {
        try await scope.showing {
            let cached = try schemas.require(table)
            let (owner, fields) = try StoreSQL.ownedFields(fields, scope, schema: cached)
            // A claim of a group takes the locked path: the table locked, the group checked, then the row written.
            if scope.claimedGroup == nil, let plan = try? cached.plan(fields), !plan.changesSchema {
                return try await insertUnlocked(plan, id: id, into: table, schema: cached, owner: owner, scope: scope)
            }
            let schemas = self.schemas
            let (item, schema) = try await lockedWrite(cached, owner: owner) { connection, stamp, stored, logger in
                guard try await Self.isWrittenGroupAllowed(scope, on: connection, logger: logger) else {
                    throw StoreSQL.forbiddenGroup(scope)
                }
                try await Self.checkClaim(
                    scope, id: id, table: stored.name, schemas: schemas, on: connection, logger: logger)
                let (plan, schema) = try await Self.applySchemaChanges(
                    for: fields, schema: stored, on: connection, logger: logger)
                let (columns, values) = StoreSQL.insertion(id: id, stamp: stamp, plan: plan, owner: owner)
                let placeholders = (1...values.count).map { "$\($0)" }.joined(separator: ", ")
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "INSERT INTO \(StoreSQL.quoted(schema.name.canonical)) "
                            + "(\(columns.map(StoreSQL.quoted).joined(separator: ", "))) "
                            + "VALUES (\(placeholders)) ON CONFLICT (\"id\") DO NOTHING RETURNING *",
                        binds: try Self.bindings(values)), logger: logger)
                for try await row in rows {
                    try await Self.record(.insert, id, schema: schema, on: connection, logger: logger)
                    return (try Self.item(from: row, schema: schema), schema)
                }
                // The table is locked: the row that took the id is there, in the scope or not.
                guard
                    let existing = try await Self.item(id, schema: schema, scope: scope, on: connection, logger: logger)
                else { throw TableStoreError.idTaken }
                throw TableStoreError.alreadyExists(existing)
            }
            publish(schema)
            return item
        }
    }

    /// An insert that adds no column and claims no group, in one statement without the table's lock: the stamp, the
    /// written group's check and the row at once.
    private func insertUnlocked(
        _ plan: WritePlan, id: ItemID, into table: TableName, schema cached: TableSchema, owner: String?,
        scope: RowScope
    ) async throws -> JSONValue {
        let first = Self.stampParameterCount(cached) + 1
        let columns =
            StoreSQL.systemColumns + plan.values.map(\.column)
            + (owner.map { _ in [TableConfiguration.ownerColumn] } ?? [])
        var values = [SQLValue.text(id.rawValue)] + plan.values.map(\.value)
        let selected =
            ["$\(first)", #""__stamp"."lastStamp""#, #""__stamp"."lastStamp""#, Self.versionSQL, "FALSE"]
            + (0..<plan.values.count).map { "$\($0 + first + 1)" }
            + (owner.map { _ in [Self.ownerParameter] } ?? [])
        var condition = ""
        if let check = StoreSQL.writtenGroupCheck(scope, dialect: .postgres) {
            // In the statement: a group the caller may not write inserts nothing.
            let (sql, arguments) = check.render(for: .postgres, firstParameterIndex: first + values.count)
            condition = " WHERE \(sql)"
            values += arguments
        }
        let sql =
            "INSERT INTO \(StoreSQL.quoted(cached.name.canonical)) "
            + "(\(columns.map(StoreSQL.quoted).joined(separator: ", "))) "
            + "SELECT \(selected.joined(separator: ", ")) FROM \"__stamp\"\(condition) ON CONFLICT (\"id\") DO NOTHING RETURNING *"
        if let item = try await writeStatement(sql, values, table: cached, owner: owner, kind: .insert) {
            return item
        }
        // The id is taken: by a row the caller may see (a conflict showing it), or not (or gone since); or the
        // group is not the caller's to write.
        guard let existing = try await item(id, in: table, scope: scope, includeDeleted: true) else {
            if try await !isWrittenGroupAllowed(scope) { throw StoreSQL.forbiddenGroup(scope) }
            throw TableStoreError.idTaken
        }
        throw TableStoreError.alreadyExists(existing)
    }

    public func update(
        _ id: ItemID, with fields: [String: JSONValue], in table: TableName, scope: RowScope,
        precondition: Precondition?, includeDeleted: Bool
    ) async throws -> JSONValue {
        try await scope.showing {
            let cached = try schemas.require(table)
            let (owner, fields) = try StoreSQL.ownedFields(fields, scope, schema: cached)
            if let plan = try? cached.plan(fields), !plan.changesSchema {
                let first = Self.stampParameterCount(cached) + 1
                let changes = plan.values + StoreSQL.deletedAssignment(fields, schema: cached)
                let assignments = changes.enumerated().map { "\(StoreSQL.quoted($1.column)) = $\($0 + first)" }
                return try await conditionalUpdate(
                    .update, id, in: cached, scope: scope, set: assignments, values: changes.map(\.value),
                    precondition: precondition, includeDeleted: includeDeleted)
            }
            let (item, schema) = try await lockedWrite(cached, owner: owner) { connection, stamp, stored, logger in
                _ = try StoreSQL.checked(
                    try await Self.item(id, schema: stored, scope: scope, on: connection, logger: logger),
                    schema: stored,
                    owner: owner,
                    precondition: precondition, includeDeleted: includeDeleted)
                guard try await Self.isWrittenGroupAllowed(scope, on: connection, logger: logger) else {
                    throw StoreSQL.forbiddenGroup(scope)
                }
                let (plan, schema) = try await Self.applySchemaChanges(
                    for: fields, schema: stored, on: connection, logger: logger)
                var assignments = ["\"updatedAt\" = $1", "\"version\" = $2"]
                var values: [SQLValue] = [.int(stamp), .text(StoreSQL.version(stamp))]
                for (column, value) in plan.values + StoreSQL.deletedAssignment(fields, schema: schema) {
                    values.append(value)
                    assignments.append("\(StoreSQL.quoted(column)) = $\(values.count)")
                }
                values.append(.text(id.rawValue))
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL:
                            "UPDATE \(StoreSQL.quoted(schema.name.canonical)) SET \(assignments.joined(separator: ", ")) "
                            + "WHERE \"id\" = $\(values.count) RETURNING *",
                        binds: try Self.bindings(values)), logger: logger)
                for try await row in rows {
                    try await Self.record(.update, id, schema: schema, on: connection, logger: logger)
                    return (try Self.item(from: row, schema: schema), schema)
                }
                throw TableStoreError.notFound
            }
            publish(schema)
            return item
        }
    }

    public func delete(_ id: ItemID, from table: TableName, scope: RowScope, precondition: Precondition?) async throws
        -> JSONValue
    {
        try await scope.showing {
            let schema = try schemas.require(table)
            let owner = try StoreSQL.writeOwner(scope, schema: schema)
            guard schema.configuration.softDelete else {
                var sql = "DELETE FROM \(StoreSQL.quoted(schema.name.canonical)) WHERE \"id\" = $1"
                var values: [SQLValue] = [.text(id.rawValue)]
                if case .version(let version) = precondition {
                    values.append(.text(version.rawValue))
                    sql += " AND \"version\" = $\(values.count)"
                }
                if let owner {
                    values.append(.text(owner))
                    sql += " AND \(StoreSQL.quoted(TableConfiguration.ownerColumn)) = $\(values.count)"
                }
                if let filter = try StoreSQL.scopeFilter(scope, schema: schema, dialect: .postgres) {
                    let (condition, arguments) = filter.render(for: .postgres, firstParameterIndex: values.count + 1)
                    sql += " AND \(condition)"
                    values += arguments
                }
                let logger = self.logger
                let statement = Self.recording(.delete, sql + " RETURNING *", schema: schema)
                let deleted = try await withConnection(isWrite: true) { [values] connection in
                    try await Self.returning(statement, values, schema: schema, on: connection, logger: logger)
                }
                if let deleted { return deleted }
                return try await explainMiss(
                    id, in: schema, scope: scope, precondition: precondition, includeDeleted: false)
            }
            return try await conditionalUpdate(
                .delete, id, in: schema, scope: scope, set: ["\"deleted\" = TRUE"], values: [],
                precondition: precondition,
                includeDeleted: false)
        }
    }

    public func undelete(_ id: ItemID, in table: TableName, scope: RowScope, precondition: Precondition?) async throws
        -> JSONValue
    {
        try await scope.showing {
            let schema = try schemas.require(table)
            _ = try StoreSQL.writeOwner(scope, schema: schema)
            return try await conditionalUpdate(
                .undelete, id, in: schema, scope: scope, set: ["\"deleted\" = FALSE"], values: [],
                precondition: precondition,
                includeDeleted: true, extraCondition: "\"deleted\"",
                onMiss: { current in current.isDeleted ? nil : current })
        }
    }

    /// The `stamp` CTE of a write to `schema`: its next stamp, from `$1` (the clock), `$2` (the table's name)
    /// and, for a per-user table, `$3` (the owner).
    func stampCTE(_ schema: TableSchema) -> String {
        switch stamping {
        case .serialized where schema.configuration.perUser:
            #"WITH "__stamp" AS (\#(Self.ownerStampSQL))"#
        case .serialized, .tableRow:
            #"WITH "__stamp" AS (UPDATE "__sync_tables" SET "lastStamp" = GREATEST($1, "lastStamp" + 1) WHERE "name" = $2 RETURNING "lastStamp")"#
        case .clockOnly:
            #"WITH "__stamp" AS (SELECT $1::bigint AS "lastStamp", $2::text AS "name")"#
        }
    }

    /// Takes the next stamp of owner `$3` in table `$2` at clock `$1`, locking the owner's row until commit.
    static let ownerStampSQL =
        #"INSERT INTO "__sync_owner_stamps" AS "s" ("table", "owner", "lastStamp") VALUES ($2, $3, $1) "#
        + #"ON CONFLICT ("table", "owner") DO UPDATE SET "lastStamp" = GREATEST($1, "s"."lastStamp" + 1) RETURNING "lastStamp""#

    /// How many parameters come before a stamped statement's own: the clock, the table's name, and the
    /// owner of a per-user table's row (``ownerParameter``).
    static func stampParameterCount(_ schema: TableSchema) -> Int {
        schema.configuration.perUser ? 3 : 2
    }

    /// The parameter that holds the owner in a stamped write to a per-user table.
    static let ownerParameter = "$3"

    /// SQL for the version of the row stamped `"__stamp"."lastStamp"`, as ``StoreSQL/version(_:)`` writes it.
    static let versionSQL = #"encode(int8send("__stamp"."lastStamp"), 'base64')"#

    /// Runs one stamped write statement (`$1` the clock, `$2` the table, `$3` the owner of a per-user table's
    /// row, then `values`) and returns the row it wrote, or nil when it matched none.
    func writeStatement(
        _ statement: String, _ values: [SQLValue], table: TableSchema, owner: String?, kind: TableWrite.Kind
    ) async throws -> JSONValue? {
        let clock = WireDate(now()).millisecondsSince1970
        let logger = self.logger
        var parameters: [SQLValue] = [.int(clock), .text(table.name.canonical)]
        if table.configuration.perUser { parameters.append(owner.map(SQLValue.text) ?? .null) }
        let sql = Self.recording(kind, statement, schema: table, after: stampCTE(table))
        return try await withConnection(isWrite: true) { [parameters] connection in
            try await Self.returning(sql, parameters + values, schema: table, on: connection, logger: logger)
        }
    }

    /// Updates a row in one stamped statement when it exists, is in `scope`, satisfies the precondition
    /// and `extraCondition`; otherwise says why not: `onMiss` gets the stored item when none of the standard
    /// reasons (404, 412) apply, and returns what to answer, or nil to try again. `assignments` number their
    /// values from ``stampParameterCount(_:)`` + 1.
    func conditionalUpdate(
        _ kind: TableWrite.Kind, _ id: ItemID, in schema: TableSchema, scope: RowScope, set assignments: [String],
        values: [SQLValue],
        precondition: Precondition?, includeDeleted: Bool, extraCondition: String? = nil,
        onMiss: (JSONValue) -> JSONValue? = { _ in nil }
    ) async throws -> JSONValue {
        let base = Self.stampParameterCount(schema)
        var values = values
        values.append(.text(id.rawValue))
        var conditions = ["\"t\".\"id\" = $\(values.count + base)"]
        if !includeDeleted { conditions.append("NOT \"t\".\"deleted\"") }
        if case .version(let version) = precondition {
            values.append(.text(version.rawValue))
            conditions.append("\"t\".\"version\" = $\(values.count + base)")
        }
        let owner = try StoreSQL.writeOwner(scope, schema: schema)
        if owner != nil {
            conditions.append("\"t\".\(StoreSQL.quoted(TableConfiguration.ownerColumn)) = \(Self.ownerParameter)")
        }
        if let filter = try StoreSQL.scopeFilter(scope, schema: schema, dialect: .postgres) {
            // On the row as updated (its own columns only, so none is taken for "__stamp"'s): a row a concurrent
            // write moved out of the scope is checked again, as it is, before this write changes it.
            let (condition, arguments) = filter.render(for: .postgres, firstParameterIndex: values.count + base + 1)
            conditions.append("EXISTS (SELECT 1 FROM (SELECT \"t\".*) AS \"__row\" WHERE \(condition))")
            values += arguments
        }
        if let check = StoreSQL.writtenGroupCheck(scope, dialect: .postgres) {
            let (condition, arguments) = check.render(for: .postgres, firstParameterIndex: values.count + base + 1)
            conditions.append(condition)
            values += arguments
        }
        if let extraCondition { conditions.append("\"t\".\(extraCondition)") }
        let sql =
            "UPDATE \(StoreSQL.quoted(schema.name.canonical)) AS \"t\" SET "
            + (assignments + [#""updatedAt" = "__stamp"."lastStamp""#, "\"version\" = \(Self.versionSQL)"])
            .joined(separator: ", ")
            + " FROM \"__stamp\" WHERE \(conditions.joined(separator: " AND ")) RETURNING \"t\".*"
        for _ in 0..<3 {
            if let item = try await writeStatement(sql, values, table: schema, owner: owner, kind: kind) {
                return item
            }
            let current = try await explainMiss(
                id, in: schema, scope: scope, precondition: precondition, includeDeleted: includeDeleted)
            if try await !isWrittenGroupAllowed(scope) { throw StoreSQL.forbiddenGroup(scope) }
            if let answer = onMiss(current) { return answer }
        }
        throw TableStoreError.unavailable("the item kept changing during the write; try again")
    }

    /// Why a conditional write matched no row: ``TableStoreError/notFound`` or
    /// ``TableStoreError/preconditionFailed(_:)``; otherwise the stored item (it changed meanwhile).
    func explainMiss(
        _ id: ItemID, in schema: TableSchema, scope: RowScope, precondition: Precondition?, includeDeleted: Bool
    ) async throws -> JSONValue {
        try StoreSQL.checked(
            try await item(id, in: schema.name, scope: scope, includeDeleted: true), schema: schema,
            owner: scope.owner, precondition: precondition, includeDeleted: includeDeleted)
    }

    /// Runs a write transaction that changes a dynamic table's schema. It locks the table against other
    /// writes, then locks the table's bookkeeping row, so instances adding the same column take turns, and
    /// takes the stamp (from the owner's row of a per-user table);
    /// `body` gets the stamp and the schema as stored (it may have grown on another instance).
    func lockedWrite<T: Sendable>(
        _ cached: TableSchema, owner: String?,
        _ body: @escaping @Sendable (PostgresConnection, Int64, TableSchema, Logger) async throws -> T
    ) async throws -> T {
        let clock = WireDate(now()).millisecondsSince1970
        let sql =
            #"UPDATE "__sync_tables" SET "lastStamp" = GREATEST($1, "lastStamp" + 1) WHERE "name" = $2 RETURNING "lastStamp", "columns""#
        let logger = self.logger
        let ownerStamp = stamping == .serialized && cached.configuration.perUser ? owner : nil
        return try await transaction { connection in
            // The table first, then its bookkeeping row — the order of a one-statement write, whose INSERT
            // or UPDATE holds the table while its stamp waits for the row. Row first deadlocked with it
            // when another instance wrote as this one altered the table (PostgreSQL ended one: a 503).
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "LOCK TABLE \(StoreSQL.quoted(cached.name.canonical)) IN SHARE ROW EXCLUSIVE MODE"),
                logger: logger)
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: sql, binds: try Self.bindings([.int(clock), .text(cached.name.canonical)])),
                logger: logger)
            for try await (tableStamp, columns) in rows.decode((Int64, String).self) {
                var stored = cached
                stored.columns = try Self.columns(from: columns)
                var stamp = tableStamp
                if let ownerStamp {
                    let owned = try await connection.query(
                        PostgresQuery(
                            unsafeSQL: Self.ownerStampSQL,
                            binds: try Self.bindings([.int(clock), .text(cached.name.canonical), .text(ownerStamp)])),
                        logger: logger)
                    for try await value in owned.decode(Int64.self) { stamp = value }
                }
                return try await body(connection, stamp, stored, logger)
            }
            throw TableStoreError.unknownTable(cached.name)
        }
    }

    /// Runs a statement ending in `RETURNING *` and returns the row as an item, or nil for no row.
    static func returning(
        _ sql: String, _ values: [SQLValue], schema: TableSchema, on connection: PostgresConnection, logger: Logger
    ) async throws -> JSONValue? {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: sql, binds: try bindings(values)), logger: logger)
        for try await row in rows { return try item(from: row, schema: schema) }
        return nil
    }

    /// The item a row holds, from the row as `row_to_json` wrote it: dates from milliseconds, JSON from its text,
    /// numbers by the column's type, collation keys left out.
    static func item(fromRowJSON row: JSONValue, schema: TableSchema) -> JSONValue {
        guard case .object(let cells) = row else { return row }
        var members: [String: JSONValue] = [:]
        for (name, value) in cells where !TableConfiguration.isCollationKeyColumn(name) {
            let type = name == "createdAt" || name == "updatedAt" ? .date : schema.columns[name]
            switch (type, value) {
            case (.date?, .int(let milliseconds)):
                members[name] = .string(WireDate(millisecondsSince1970: milliseconds).description)
            case (.double?, .int(let int)): members[name] = .double(Double(int))
            case (.integer?, .double(let double)): members[name] = Int64(exactly: double).map(JSONValue.int) ?? value
            case (.json?, .string(let text)): members[name] = (try? JSONValue(parsing: text)) ?? value
            default: members[name] = value
            }
        }
        return .object(members)
    }
}
