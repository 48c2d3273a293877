import Logging
import PostgresNIO
public import SyncCore

extension PostgresTableStore {
    public func insert(_ fields: [String: JSONValue], id: ItemID, into table: TableName) async throws -> JSONValue {
        let cached = try schemas.require(table)
        let (item, schema) = try await write(cached) { connection, stamp, stored, logger in
            let (plan, schema) = try await Self.applySchemaChanges(
                for: fields, schema: stored, on: connection, logger: logger)
            var columns = ["id", "createdAt", "updatedAt", "version", "deleted"]
            var values: [SQLValue] = [
                .text(id.rawValue), .int(stamp), .int(stamp), .text(StoreSQL.version(stamp)), .bool(false),
            ]
            for (column, value) in plan.values {
                columns.append(column)
                values.append(value)
            }
            let name = StoreSQL.quoted(schema.name.canonical)
            let placeholders = (1...values.count).map { "$\($0)" }.joined(separator: ", ")
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: "INSERT INTO \(name) (\(columns.map(StoreSQL.quoted).joined(separator: ", "))) "
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
        let (item, schema) = try await write(cached) { connection, stamp, stored, logger in
            _ = try await Self.checked(
                id, schema: stored, precondition: precondition, includeDeleted: includeDeleted, on: connection,
                logger: logger)
            let (plan, schema) = try await Self.applySchemaChanges(
                for: fields, schema: stored, on: connection, logger: logger)
            var assignments = ["\"updatedAt\" = $1", "\"version\" = $2"]
            var values: [SQLValue] = [.int(stamp), .text(StoreSQL.version(stamp))]
            for (column, value) in plan.values {
                values.append(value)
                assignments.append("\(StoreSQL.quoted(column)) = $\(values.count)")
            }
            values.append(.text(id.rawValue))
            let item = try await Self.returning(
                "UPDATE \(StoreSQL.quoted(schema.name.canonical)) SET \(assignments.joined(separator: ", ")) "
                    + "WHERE \"id\" = $\(values.count) RETURNING *", values, schema: schema, on: connection,
                logger: logger)
            return (item, schema)
        }
        schemas.publish(schema)
        return item
    }

    public func delete(_ id: ItemID, from table: TableName, precondition: Precondition?) async throws -> JSONValue {
        let cached = try schemas.require(table)
        return try await write(cached) { connection, stamp, schema, logger in
            let current = try await Self.checked(
                id, schema: schema, precondition: precondition, includeDeleted: false, on: connection, logger: logger)
            let name = StoreSQL.quoted(schema.name.canonical)
            guard schema.configuration.softDelete else {
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "DELETE FROM \(name) WHERE \"id\" = $1",
                        binds: try Self.bindings([.text(id.rawValue)])),
                    logger: logger)
                return current
            }
            return try await Self.returning(
                "UPDATE \(name) SET \"deleted\" = TRUE, \"updatedAt\" = $1, \"version\" = $2 WHERE \"id\" = $3 RETURNING *",
                [.int(stamp), .text(StoreSQL.version(stamp)), .text(id.rawValue)], schema: schema, on: connection,
                logger: logger)
        }
    }

    public func undelete(_ id: ItemID, in table: TableName, precondition: Precondition?) async throws -> JSONValue {
        let cached = try schemas.require(table)
        return try await write(cached) { connection, stamp, schema, logger in
            let current = try await Self.checked(
                id, schema: schema, precondition: precondition, includeDeleted: true, on: connection, logger: logger)
            guard current.isDeleted else { return current }
            return try await Self.returning(
                "UPDATE \(StoreSQL.quoted(schema.name.canonical)) SET \"deleted\" = FALSE, \"updatedAt\" = $1, \"version\" = $2 WHERE \"id\" = $3 RETURNING *",
                [.int(stamp), .text(StoreSQL.version(stamp)), .text(id.rawValue)], schema: schema, on: connection,
                logger: logger)
        }
    }

    /// Runs a write transaction on `table`. Its first statement takes the write's stamp from the
    /// table's row in `__sync_tables`, which also locks that row until commit, so writes to a table
    /// (and its schema changes) take turns across every instance and commit in stamp order. `body`
    /// gets the stamp and the schema as stored (a dynamic table may have grown on another instance).
    func write<T: Sendable>(
        _ cached: TableSchema,
        _ body: @escaping @Sendable (PostgresConnection, Int64, TableSchema, Logger) async throws -> T
    ) async throws -> T {
        let clock = WireDate(now()).millisecondsSince1970
        let stampSQL =
            switch stamping {
            case .serialized:
                #"UPDATE "__sync_tables" SET "lastStamp" = GREATEST($1, "lastStamp" + 1) WHERE "name" = $2 RETURNING "lastStamp", "columns""#
            case .clockOnly:
                #"SELECT $1::bigint, "columns" FROM "__sync_tables" WHERE "name" = $2"#
            }
        let logger = self.logger
        return try await transaction { connection in
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: stampSQL, binds: try Self.bindings([.int(clock), .text(cached.name.canonical)])),
                logger: logger)
            for try await (stamp, columns) in rows.decode((Int64, String).self) {
                var stored = cached
                stored.columns = try Self.columns(from: columns)
                return try await body(connection, stamp, stored, logger)
            }
            throw TableStoreError.unknownTable(cached.name)
        }
    }

    /// The stored item, after checking that it exists (a tombstone only with `includeDeleted`) and
    /// satisfies the precondition.
    static func checked(
        _ id: ItemID, schema: TableSchema, precondition: Precondition?, includeDeleted: Bool,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> JSONValue {
        guard let item = try await item(id, schema: schema, on: connection, logger: logger) else {
            throw TableStoreError.notFound
        }
        if item.isDeleted, !includeDeleted { throw TableStoreError.notFound }
        if let precondition, !precondition.isSatisfied(by: item.version ?? Version("")) {
            throw TableStoreError.preconditionFailed(item)
        }
        return item
    }

    /// Runs a statement ending in `RETURNING *` and returns the row as an item.
    static func returning(
        _ sql: String, _ values: [SQLValue], schema: TableSchema, on connection: PostgresConnection, logger: Logger
    ) async throws -> JSONValue {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: sql, binds: try bindings(values)), logger: logger)
        for try await row in rows { return try item(from: row, schema: schema) }
        throw TableStoreError.notFound
    }
}
