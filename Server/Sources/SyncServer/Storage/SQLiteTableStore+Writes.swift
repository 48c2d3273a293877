public import Foundation
import GRDB
public import SyncCore
import SyncSQL
import SyncSQLite

extension SQLiteTableStore {
    public func insert(_ fields: [String: JSONValue], id: ItemID, into table: TableName, scope: RowScope) async throws
        -> JSONValue
    {
        try await scope.showing {
            let known = try schemas.require(table)
            let (owner, fields) = try StoreSQL.ownedFields(fields, scope, schema: known)
            let (now, schemas) = (self.now, self.schemas)
            let (item, schema) = try await write { db in
                var schema = try Self.committedSchema(known, in: db)
                let plan = try schema.plan(fields)
                if let existing = try Self.row(id, schema: schema, in: db) {
                    let item = Self.item(from: existing, schema: schema)
                    guard try Self.isInScope(item, scope, schema: schema, in: db) else { throw TableStoreError.idTaken }
                    throw TableStoreError.alreadyExists(item)
                }
                try Self.checkWrittenGroup(scope, in: db)
                try Self.checkClaim(scope, schemas: schemas, in: db)
                if plan.changesSchema { schema = try Self.applySchemaChanges(plan, to: schema, in: db) }
                let stamp = try Self.nextStamp(for: schema, now: now, in: db)
                let (columns, values) = StoreSQL.insertion(id: id, stamp: stamp, plan: plan, owner: owner)
                try db.execute(
                    sql:
                        "INSERT INTO \(StoreSQL.quoted(schema.name.canonical)) (\(columns.map(StoreSQL.quoted).joined(separator: ", "))) "
                        + "VALUES (\(Array(repeating: "?", count: values.count).joined(separator: ", ")))",
                    arguments: StatementArguments(sqlValues: values))
                return (try Self.recorded(.insert, id, schema: schema, in: db), schema)
            }
            publish(schema)
            return item
        }
    }

    public func update(
        _ id: ItemID, with fields: [String: JSONValue], in table: TableName, scope: RowScope,
        precondition: Precondition?, includeDeleted: Bool
    ) async throws -> JSONValue {
        try await scope.showing {
            let known = try schemas.require(table)
            let fields = try StoreSQL.ownedFields(fields, scope, schema: known).fields
            let now = self.now
            let (item, schema) = try await write { db in
                var schema = try Self.committedSchema(known, in: db)
                let plan = try schema.plan(fields)
                _ = try Self.checked(
                    id, schema: schema, scope: scope, precondition: precondition, includeDeleted: includeDeleted, in: db
                )
                try Self.checkWrittenGroup(scope, in: db)
                if plan.changesSchema { schema = try Self.applySchemaChanges(plan, to: schema, in: db) }
                let stamp = try Self.nextStamp(for: schema, now: now, in: db)
                var assignments = ["\"updatedAt\" = ?", "\"version\" = ?"]
                var values: [SQLValue] = [.int(stamp), .text(StoreSQL.version(stamp))]
                for (column, value) in plan.values + StoreSQL.deletedAssignment(fields, schema: schema) {
                    assignments.append("\(StoreSQL.quoted(column)) = ?")
                    values.append(value)
                }
                try db.execute(
                    sql:
                        "UPDATE \(StoreSQL.quoted(schema.name.canonical)) SET \(assignments.joined(separator: ", ")) WHERE \"id\" = ?",
                    arguments: StatementArguments(sqlValues: values + [.text(id.rawValue)]))
                return (try Self.recorded(.update, id, schema: schema, in: db), schema)
            }
            publish(schema)
            return item
        }
    }

    public func delete(_ id: ItemID, from table: TableName, scope: RowScope, precondition: Precondition?) async throws
        -> JSONValue
    {
        try await changeDeletion(true, id, in: table, scope: scope, precondition: precondition)
    }

    public func undelete(_ id: ItemID, in table: TableName, scope: RowScope, precondition: Precondition?) async throws
        -> JSONValue
    {
        try await changeDeletion(false, id, in: table, scope: scope, precondition: precondition)
    }

    /// A delete (`deleted`) or an undelete, with the row checked in the write's transaction — a delete finds a live
    /// row only, an undelete a tombstone too (a live row is returned as it is) — then soft-deleted, brought back, or
    /// (a delete without soft delete) removed.
    private func changeDeletion(
        _ deleted: Bool, _ id: ItemID, in table: TableName, scope: RowScope, precondition: Precondition?
    ) async throws -> JSONValue {
        try await scope.showing {
            let cached = try schemas.require(table)
            _ = try StoreSQL.writeOwner(scope, schema: cached)
            let now = self.now
            return try await write { db in
                let schema = try Self.committedSchema(cached, in: db)
                let current = try Self.checked(
                    id, schema: schema, scope: scope, precondition: precondition, includeDeleted: !deleted, in: db)
                if !deleted, !current.isDeleted { return current }
                if deleted, !schema.configuration.softDelete {
                    try db.execute(
                        sql: "DELETE FROM \(StoreSQL.quoted(schema.name.canonical)) WHERE \"id\" = ?",
                        arguments: [id.rawValue])
                    try Self.record(.delete, current, schema: schema, in: db)
                    return current
                }
                return try Self.setDeleted(deleted, id, schema: schema, now: now, in: db)
            }
        }
    }

    /// Soft-deletes (or brings back) a checked item with a new stamp, and returns it as recorded.
    static func setDeleted(
        _ deleted: Bool, _ id: ItemID, schema: TableSchema, now: @Sendable () -> Date, in db: Database
    ) throws -> JSONValue {
        let stamp = try nextStamp(for: schema, now: now, in: db)
        try db.execute(
            sql: "UPDATE \(StoreSQL.quoted(schema.name.canonical)) "
                + "SET \"deleted\" = ?, \"updatedAt\" = ?, \"version\" = ? WHERE \"id\" = ?",
            arguments: [deleted, stamp, StoreSQL.version(stamp), id.rawValue])
        return try recorded(deleted ? .delete : .undelete, id, schema: schema, in: db)
    }

    /// The stored item, after checking that it exists (a tombstone only with `includeDeleted`), is in `scope`,
    /// and satisfies the precondition.
    static func checked(
        _ id: ItemID, schema: TableSchema, scope: RowScope, precondition: Precondition?, includeDeleted: Bool,
        in db: Database
    ) throws -> JSONValue {
        var stored = try row(id, schema: schema, in: db).map { item(from: $0, schema: schema) }
        if let item = stored, try !isInScope(item, scope, schema: schema, in: db) { stored = nil }
        return try StoreSQL.checked(
            stored, schema: schema, owner: scope.owner, precondition: precondition, includeDeleted: includeDeleted)
    }

    /// Refuses a write into a group the caller may not write (``RowScope/writtenGroup``), in its transaction.
    static func checkWrittenGroup(_ scope: RowScope, in db: Database) throws {
        guard let check = StoreSQL.writtenGroupCheck(scope, dialect: .sqlite) else { return }
        let (sql, arguments) = check.render(for: .sqlite)
        guard try Bool.fetchOne(db, sql: "SELECT \(sql)", arguments: StatementArguments(sqlValues: arguments)) == true
        else { throw StoreSQL.forbiddenGroup(scope) }
    }

    /// Refuses an insert that claims a group which is not free (``RowScope/claimedGroup``), in its transaction: SQLite
    /// writes one transaction at a time, so of several claims of one group the first alone finds it free.
    static func checkClaim(_ scope: RowScope, schemas: SchemaCache, in db: Database) throws {
        guard let claim = scope.claimedGroup else { return }
        let (sql, arguments) = claim.freeCondition { schemas.schema(of: $0).map { Set($0.columns.keys) } }
            .render(for: .sqlite)
        guard try Bool.fetchOne(db, sql: "SELECT \(sql)", arguments: StatementArguments(sqlValues: arguments)) == true
        else { throw claim.refusal }
    }

    /// Whether the stored `item` is in `scope`: the owner's, in a per-user table, and passing the scope's filter
    /// (asked of the database, in the caller's transaction).
    static func isInScope(_ item: JSONValue, _ scope: RowScope, schema: TableSchema, in db: Database) throws -> Bool {
        guard StoreSQL.isVisible(item, to: scope.owner, schema: schema) else { return false }
        guard let filter = try StoreSQL.scopeFilter(scope, schema: schema, dialect: .sqlite),
            let id = IntegerIDs.storedText(of: item[SystemProperty.id.rawValue])
        else { return true }
        let (sql, arguments) = filter.render(for: .sqlite)
        return try Bool.fetchOne(
            db,
            sql: "SELECT 1 FROM \(StoreSQL.quoted(schema.name.canonical)) WHERE \"id\" = ? AND \(sql)",
            arguments: StatementArguments(sqlValues: [.text(id)] + arguments)) ?? false
    }

    /// The item as a write of `kind` left it, recorded in the outbox when the table records its commits.
    static func recorded(_ kind: TableWrite.Kind, _ id: ItemID, schema: TableSchema, in db: Database) throws
        -> JSONValue
    {
        guard let row = try row(id, schema: schema, in: db) else { throw TableStoreError.notFound }
        let item = item(from: row, schema: schema)
        try record(kind, item, schema: schema, in: db)
        return item
    }

    /// Records a write in the outbox, in the write's transaction, when the table records its commits.
    static func record(_ kind: TableWrite.Kind, _ item: JSONValue, schema: TableSchema, in db: Database) throws {
        guard schema.configuration.recordsCommits else { return }
        try db.execute(
            sql: "INSERT INTO \"\(CommitOutbox.table)\" (\"table\", \"kind\", \"item\") VALUES (?, ?, ?)",
            arguments: StatementArguments(sqlValues: CommitOutbox.entry(kind, item, schema: schema)))
    }

    /// The next `updatedAt` of a table (see ``StoreSQL/nextStamp(after:now:)``); SQLite serializes writes,
    /// so stamps strictly increase in commit order — past the table's horizon too, so that a stamp of a removed
    /// tombstone is never given again.
    static func nextStamp(for schema: TableSchema, now: @Sendable () -> Date, in db: Database) throws -> Int64 {
        StoreSQL.nextStamp(after: try newestStamp(of: schema, in: db), now: now())
    }

    /// The newest stamp a table gave, to a row it holds or to a tombstone it removed (its horizon); nil for none.
    static func newestStamp(of schema: TableSchema, in db: Database) throws -> Int64? {
        try Int64.fetchOne(
            db,
            sql:
                "SELECT nullif(max(coalesce((SELECT MAX(\"updatedAt\") FROM \(StoreSQL.quoted(schema.name.canonical))), 0), "
                + #"coalesce((SELECT "horizon" FROM "__sync_tables" WHERE "name" = ?), 0)), 0)"#,
            arguments: [schema.name.canonical])
    }

    /// The table's horizon (``TombstoneRemoval/horizon``) as the database holds it.
    static func horizon(of table: TableName, in db: Database) throws -> WireDate? {
        try Int64.fetchOne(
            db, sql: #"SELECT "horizon" FROM "__sync_tables" WHERE "name" = ?"#, arguments: [table.canonical]
        ).map(WireDate.init(millisecondsSince1970:))
    }

    /// Forgets up to `limit` of the oldest remembered ids of `table`'s removed tombstones stamped before `cutoff`, and
    /// moves the table's `forgotten` stamp to the newest of them (``removedTrace(of:in:since:)``).
    static func forgetRemovedIDs(of table: TableName, before cutoff: Int64, limit: Int, in db: Database) throws {
        guard
            let newest = try Int64.fetchOne(
                db,
                sql:
                    #"SELECT max("stamp") FROM (SELECT "stamp" FROM "__sync_removed" "#
                    + #"WHERE "table" = ? AND "stamp" < ? ORDER BY "stamp" LIMIT ?)"#,
                arguments: [table.canonical, cutoff, limit])
        else { return }
        try db.execute(
            sql: #"DELETE FROM "__sync_removed" WHERE "table" = ? AND "stamp" <= ?"#,
            arguments: [table.canonical, newest])
        try db.execute(
            sql: #"UPDATE "__sync_tables" SET "forgotten" = max(coalesce("forgotten", 0), ?) WHERE "name" = ?"#,
            arguments: [newest, table.canonical])
    }

    public func removedTrace(of id: ItemID, in table: TableName, since floor: WireDate) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db,
                sql: #"SELECT EXISTS (SELECT 1 FROM "__sync_removed" WHERE "table" = ? AND "id" = ?) "#
                    + #"OR coalesce((SELECT "forgotten" FROM "__sync_tables" WHERE "name" = ?), 0) > ?"#,
                arguments: [table.canonical, id.rawValue, table.canonical, floor.millisecondsSince1970]) ?? false
        }
    }

    public func removeTombstones(of table: TableName, olderThan age: Duration, at now: Date, limit: Int) async throws
        -> TombstoneRemoval
    {
        let schema = try schemas.require(table)
        let name = StoreSQL.quoted(schema.name.canonical)
        let (clock, age) = (WireDate(now).millisecondsSince1970, age.milliseconds)
        return try await write { db in
            let newestStamp = try Int64.fetchOne(db, sql: "SELECT max(\"updatedAt\") FROM \(name)") ?? 0
            let cutoff = max(clock, newestStamp) - age
            // Stamps are unique within a table: the batch is the tombstones up to its newest.
            let newest = try Int64.fetchOne(
                db,
                sql: "SELECT max(\"updatedAt\") FROM (SELECT \"updatedAt\" FROM \(name) "
                    + "WHERE \"deleted\" = 1 AND \"updatedAt\" < ? ORDER BY \"updatedAt\" LIMIT ?)",
                arguments: [cutoff, limit])
            var removed = 0
            if let newest {
                if schema.configuration.recordsCommits {
                    // Undelivered writes of the rows that go: what was deleted does not outlive the retention there.
                    try db.execute(
                        sql: "DELETE FROM \"\(CommitOutbox.table)\" WHERE \"table\" = ? AND "
                            + "CAST(json_extract(\"item\", '$.id') AS TEXT) IN "
                            + "(SELECT \"id\" FROM \(name) WHERE \"deleted\" = 1 AND \"updatedAt\" <= ?)",
                        arguments: [table.canonical, newest])
                }
                // Their ids are remembered a while longer (``TombstoneRemoval/idMemory(after:)``).
                try db.execute(
                    sql: #"INSERT OR REPLACE INTO "__sync_removed" ("table", "id", "stamp") "#
                        + "SELECT ?, CAST(\"id\" AS TEXT), \"updatedAt\" FROM \(name) "
                        + "WHERE \"deleted\" = 1 AND \"updatedAt\" <= ?",
                    arguments: [table.canonical, newest])
                try db.execute(
                    sql: "DELETE FROM \(name) WHERE \"deleted\" = 1 AND \"updatedAt\" <= ?", arguments: [newest])
                removed = db.changesCount
                try db.execute(
                    sql: #"UPDATE "__sync_tables" SET "horizon" = max(coalesce("horizon", 0), ?) WHERE "name" = ?"#,
                    arguments: [newest, table.canonical])
            }
            try Self.forgetRemovedIDs(
                of: table, before: cutoff - TombstoneRemoval.idMemory(after: .milliseconds(age)).milliseconds,
                limit: limit, in: db)
            return TombstoneRemoval(removed: removed, horizon: try Self.horizon(of: table, in: db))
        }
    }

    public func leaseCommits(limit: Int, for lease: Duration) async throws -> [CommittedWrite] {
        let now = WireDate(self.now()).millisecondsSince1970
        return try await write { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT \"sequence\", \"table\", \"kind\", \"item\" FROM \"\(CommitOutbox.table)\" "
                    + "WHERE \"leasedUntil\" < ? ORDER BY \"sequence\" LIMIT ?",
                arguments: [now, limit])
            guard let last = rows.last?["sequence"] as Int64? else { return [] }
            try db.execute(
                sql: "UPDATE \"\(CommitOutbox.table)\" SET \"leasedUntil\" = ? "
                    + "WHERE \"leasedUntil\" < ? AND \"sequence\" <= ?",
                arguments: [now + lease.milliseconds, now, last])
            return rows.compactMap { row in
                CommitOutbox.write(sequence: row["sequence"], table: row["table"], kind: row["kind"], item: row["item"])
            }
        }
    }

    public func memberships(of user: String, in table: TableName, group: String?, exitsOf: TableName?)
        async throws -> [Membership]
    {
        let (sql, arguments) = try StoreSQL.membershipsQuery(
            of: user, schema: try schemas.require(table), group: group, exitsOf: exitsOf
        ).render(for: .sqlite)
        return try await read { db in
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(sqlValues: arguments)).compactMap { row in
                let group: String? = row[0]
                return group.map { Membership(group: $0, role: row[1], exit: row[2]) }
            }
        }
    }

    public func removeCommits(_ sequences: [Int64]) async throws {
        guard !sequences.isEmpty else { return }
        try await write { db in
            // One statement per 500 (SQLite binds at most 32,766 parameters; batches are far smaller).
            for chunk in stride(from: 0, to: sequences.count, by: 500).map({
                sequences[$0..<min($0 + 500, sequences.count)]
            }) {
                try db.execute(
                    sql: "DELETE FROM \"\(CommitOutbox.table)\" WHERE \"sequence\" IN ("
                        + Array(repeating: "?", count: chunk.count).joined(separator: ", ") + ")",
                    arguments: StatementArguments(Array(chunk)))
            }
        }
    }
}
