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

extension PostgresTableStore {
    public func insert(_ fields: [String: JSONValue], id: ItemID, into table: TableName) async throws -> JSONValue {
        let cached = try schemas.require(table)
        if let plan = try? cached.plan(fields), !plan.changesSchema {
            let columns = StoreSQL.systemColumns + plan.values.map(\.column)
            let values = [SQLValue.text(id.rawValue)] + plan.values.map(\.value)
            let selected =
                ["$3", #""__stamp"."lastStamp""#, #""__stamp"."lastStamp""#, Self.versionSQL, "FALSE"]
                + (0..<plan.values.count).map { "$\($0 + 4)" }
            let sql =
                "\(stampCTE) INSERT INTO \(StoreSQL.quoted(cached.name.canonical)) "
                + "(\(columns.map(StoreSQL.quoted).joined(separator: ", "))) "
                + "SELECT \(selected.joined(separator: ", ")) FROM \"__stamp\" ON CONFLICT (\"id\") DO NOTHING RETURNING *"
            if let item = try await writeStatement(sql, values, table: cached) { return item }
            throw TableStoreError.alreadyExists(try await item(id, in: table, includeDeleted: true) ?? .null)
        }
        let (item, schema) = try await lockedWrite(cached) { connection, stamp, stored, logger in
            let (plan, schema) = try await Self.applySchemaChanges(
                for: fields, schema: stored, on: connection, logger: logger)
            let (columns, values) = StoreSQL.insertion(id: id, stamp: stamp, plan: plan)
            let placeholders = (1...values.count).map { "$\($0)" }.joined(separator: ", ")
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: "INSERT INTO \(StoreSQL.quoted(schema.name.canonical)) "
                        + "(\(columns.map(StoreSQL.quoted).joined(separator: ", "))) "
                        + "VALUES (\(placeholders)) ON CONFLICT (\"id\") DO NOTHING RETURNING *",
                    binds: try Self.bindings(values)), logger: logger)
            for try await row in rows { return (try Self.item(from: row, schema: schema), schema) }
            let existing = try await Self.item(id, schema: schema, on: connection, logger: logger)
            throw TableStoreError.alreadyExists(existing ?? .null)
        }
        schemas.publish(schema)
        return item
    }

    public func update(
        _ id: ItemID, with fields: [String: JSONValue], in table: TableName, precondition: Precondition?,
        includeDeleted: Bool
    ) async throws -> JSONValue {
        let cached = try schemas.require(table)
        if let plan = try? cached.plan(fields), !plan.changesSchema {
            let assignments = plan.values.enumerated().map { "\(StoreSQL.quoted($1.column)) = $\($0 + 3)" }
            return try await conditionalUpdate(
                id, in: cached, set: assignments, values: plan.values.map(\.value), precondition: precondition,
                includeDeleted: includeDeleted)
        }
        let (item, schema) = try await lockedWrite(cached) { connection, stamp, stored, logger in
            _ = try StoreSQL.checked(
                try await Self.item(id, schema: stored, on: connection, logger: logger), precondition: precondition,
                includeDeleted: includeDeleted)
            let (plan, schema) = try await Self.applySchemaChanges(
                for: fields, schema: stored, on: connection, logger: logger)
            var assignments = ["\"updatedAt\" = $1", "\"version\" = $2"]
            var values: [SQLValue] = [.int(stamp), .text(StoreSQL.version(stamp))]
            for (column, value) in plan.values {
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
            for try await row in rows { return (try Self.item(from: row, schema: schema), schema) }
            throw TableStoreError.notFound
        }
        schemas.publish(schema)
        return item
    }

    public func delete(_ id: ItemID, from table: TableName, precondition: Precondition?) async throws -> JSONValue {
        let schema = try schemas.require(table)
        guard schema.configuration.softDelete else {
            var sql = "DELETE FROM \(StoreSQL.quoted(schema.name.canonical)) WHERE \"id\" = $1"
            var values: [SQLValue] = [.text(id.rawValue)]
            if case .version(let version) = precondition {
                values.append(.text(version.rawValue))
                sql += " AND \"version\" = $2"
            }
            let logger = self.logger
            let deleted = try await withConnection(isWrite: true) { [sql, values] connection in
                try await Self.returning(sql + " RETURNING *", values, schema: schema, on: connection, logger: logger)
            }
            if let deleted { return deleted }
            return try await explainMiss(id, in: schema, precondition: precondition, includeDeleted: false)
        }
        return try await conditionalUpdate(
            id, in: schema, set: ["\"deleted\" = TRUE"], values: [], precondition: precondition, includeDeleted: false)
    }

    public func undelete(_ id: ItemID, in table: TableName, precondition: Precondition?) async throws -> JSONValue {
        let schema = try schemas.require(table)
        return try await conditionalUpdate(
            id, in: schema, set: ["\"deleted\" = FALSE"], values: [], precondition: precondition, includeDeleted: true,
            extraCondition: "\"deleted\"", onMiss: { current in current.isDeleted ? nil : current })
    }

    /// The `stamp` CTE: the table's next stamp as `$1`, `$2` (the clock, the table's name).
    var stampCTE: String {
        switch stamping {
        case .serialized:
            #"WITH "__stamp" AS (UPDATE "__sync_tables" SET "lastStamp" = GREATEST($1, "lastStamp" + 1) WHERE "name" = $2 RETURNING "lastStamp")"#
        case .clockOnly:
            #"WITH "__stamp" AS (SELECT $1::bigint AS "lastStamp", $2::text AS "name")"#
        }
    }

    /// SQL for the version of the row stamped `"__stamp"."lastStamp"`, as ``StoreSQL/version(_:)`` writes it.
    static let versionSQL = #"encode(int8send("__stamp"."lastStamp"), 'base64')"#

    /// Runs one stamped write statement (`$1` the clock, `$2` the table, then `values`) and returns the
    /// row it wrote, or nil when it matched none.
    func writeStatement(_ sql: String, _ values: [SQLValue], table: TableSchema) async throws -> JSONValue? {
        let clock = WireDate(now()).millisecondsSince1970
        let logger = self.logger
        return try await withConnection(isWrite: true) { connection in
            try await Self.returning(
                sql, [.int(clock), .text(table.name.canonical)] + values, schema: table, on: connection,
                logger: logger)
        }
    }

    /// Updates a row in one stamped statement when it exists, is visible, satisfies the precondition
    /// and `extraCondition`; otherwise says why not: `onMiss` gets the stored item when none of the
    /// standard reasons (404, 412) apply, and returns what to answer, or nil to try again.
    func conditionalUpdate(
        _ id: ItemID, in schema: TableSchema, set assignments: [String], values: [SQLValue],
        precondition: Precondition?, includeDeleted: Bool, extraCondition: String? = nil,
        onMiss: (JSONValue) -> JSONValue? = { _ in nil }
    ) async throws -> JSONValue {
        var values = values
        var conditions = ["\"t\".\"id\" = $\(values.count + 3)"]
        values.append(.text(id.rawValue))
        if !includeDeleted { conditions.append("NOT \"t\".\"deleted\"") }
        if case .version(let version) = precondition {
            values.append(.text(version.rawValue))
            conditions.append("\"t\".\"version\" = $\(values.count + 2)")
        }
        if let extraCondition { conditions.append("\"t\".\(extraCondition)") }
        let sql =
            "\(stampCTE) UPDATE \(StoreSQL.quoted(schema.name.canonical)) AS \"t\" SET "
            + (assignments + [#""updatedAt" = "__stamp"."lastStamp""#, "\"version\" = \(Self.versionSQL)"])
            .joined(separator: ", ")
            + " FROM \"__stamp\" WHERE \(conditions.joined(separator: " AND ")) RETURNING \"t\".*"
        for _ in 0..<3 {
            if let item = try await writeStatement(sql, values, table: schema) { return item }
            let current = try await explainMiss(
                id, in: schema, precondition: precondition, includeDeleted: includeDeleted)
            if let answer = onMiss(current) { return answer }
        }
        throw TableStoreError.unavailable("the item kept changing during the write; try again")
    }

    /// Why a conditional write matched no row: ``TableStoreError/notFound`` or
    /// ``TableStoreError/preconditionFailed(_:)``; otherwise the stored item (it changed meanwhile).
    func explainMiss(_ id: ItemID, in schema: TableSchema, precondition: Precondition?, includeDeleted: Bool)
        async throws -> JSONValue
    {
        try StoreSQL.checked(
            try await item(id, in: schema.name, includeDeleted: true), precondition: precondition,
            includeDeleted: includeDeleted)
    }

    /// Runs a write transaction that changes a dynamic table's schema. It locks the table against other
    /// writes, then takes the stamp and locks the table's bookkeeping row, so instances adding the same
    /// column take turns;
    /// `body` gets the stamp and the schema as stored (it may have grown on another instance).
    func lockedWrite<T: Sendable>(
        _ cached: TableSchema,
        _ body: @escaping @Sendable (PostgresConnection, Int64, TableSchema, Logger) async throws -> T
    ) async throws -> T {
        let clock = WireDate(now()).millisecondsSince1970
        let sql =
            #"UPDATE "__sync_tables" SET "lastStamp" = GREATEST($1, "lastStamp" + 1) WHERE "name" = $2 RETURNING "lastStamp", "columns""#
        let logger = self.logger
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
            for try await (stamp, columns) in rows.decode((Int64, String).self) {
                var stored = cached
                stored.columns = try Self.columns(from: columns)
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
}
