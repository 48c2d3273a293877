public import Foundation
import Logging
import PostgresNIO
public import SyncCore
import SyncOData

extension PostgresTableStore {
    /// The advisory lock that lets one instance at a time remove tombstones.
    static let tombstoneLockKey: Int64 = 0x4f66_666c_476f_6e65  // "OfflGone"

    public func removeTombstones(of table: TableName, olderThan age: Duration, at now: Date, limit: Int) async throws
        -> TombstoneRemoval
    {
        let schema = try schemas.require(table)
        let name = StoreSQL.quoted(schema.name.canonical)
        let clock = WireDate(now).millisecondsSince1970
        // A per-user table's owners stamp apart: one owner's run ahead must not age another's tombstones.
        let cutoff =
            schema.configuration.perUser
            ? "\(clock - age.milliseconds)"
            : "(SELECT GREATEST(\(clock), max(\"updatedAt\")) - \(age.milliseconds) FROM \(name))"
        let logger = self.logger
        return try await transaction { connection in
            var removed = 0
            // Another instance removing meanwhile holds the lock: this one leaves the work to it.
            let locked = try await connection.query(
                "SELECT pg_try_advisory_xact_lock(\(Self.tombstoneLockKey))", logger: logger)
            var holds = false
            for try await value in locked.decode(Bool.self) { holds = value }
            if holds {
                // A per-user table's stamps are unique per owner only: the batch may pass `limit` by a few rows.
                let newestRows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT max(\"updatedAt\") FROM (SELECT \"updatedAt\" FROM \(name) WHERE \"deleted\" "
                            + "AND \"updatedAt\" < \(cutoff) ORDER BY \"updatedAt\" LIMIT \(limit)) AS \"batch\""),
                    logger: logger)
                var newest: Int64?
                for try await value in newestRows.decode(Int64?.self) { newest = value }
                if let newest {
                    try await Self.beforeRemoving(
                        table, in: name, upTo: newest, recordsCommits: schema.configuration.recordsCommits,
                        on: connection, logger: logger)
                    let counted = try await connection.query(
                        PostgresQuery(
                            unsafeSQL: "WITH \"gone\" AS (DELETE FROM \(name) WHERE \"deleted\" AND \"updatedAt\" <= "
                                + "\(newest) RETURNING 1) SELECT count(*) FROM \"gone\""),
                        logger: logger)
                    for try await value in counted.decode(Int64.self) { removed = Int(value) }
                    try await connection.query(
                        #"UPDATE "__sync_tables" SET "horizon" = GREATEST(coalesce("horizon", 0), \#(newest)) WHERE "name" = \#(table.canonical)"#,
                        logger: logger)
                }
                try await Self.forgetRemovedIDs(
                    of: table, before: "\(cutoff) - \(TombstoneRemoval.idMemory(after: age).milliseconds)",
                    limit: limit,
                    on: connection, logger: logger)
            }
            return TombstoneRemoval(
                removed: removed, horizon: try await Self.horizon(of: table, on: connection, logger: logger))
        }
    }

    /// What goes with `table`'s tombstones stamped up to `newest` (in `name`, its quoted table), about to be removed:
    /// their undelivered after-commit writes, when the table records them (what was deleted does not outlive the
    /// retention there), and their ids, remembered for ``TombstoneRemoval/idMemory(after:)``.
    static func beforeRemoving(
        _ table: TableName, in name: String, upTo newest: Int64, recordsCommits: Bool,
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        let gone = "FROM \(name) WHERE \"deleted\" AND \"updatedAt\" <= \(newest)"
        var statements = [
            "INSERT INTO \"__sync_removed\" (\"table\", \"id\", \"stamp\") SELECT '\(table.canonical)', "
                + "\"id\"::text, \"updatedAt\" \(gone) ON CONFLICT (\"table\", \"id\") DO UPDATE SET "
                + "\"stamp\" = excluded.\"stamp\""
        ]
        if recordsCommits {
            statements.append(
                "DELETE FROM \"\(CommitOutbox.table)\" WHERE \"table\" = '\(table.canonical)' "
                    + "AND (\"item\"::jsonb ->> 'id') IN (SELECT \"id\" \(gone))")
        }
        for statement in statements {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
    }

    /// Forgets up to `limit` of the oldest remembered ids of `table`'s removed tombstones stamped before `cutoff` (an
    /// SQL expression), and moves the table's `forgotten` stamp to the newest of them (``removedTrace(of:in:since:)``).
    static func forgetRemovedIDs(
        of table: TableName, before cutoff: String, limit: Int, on connection: PostgresConnection, logger: Logger
    ) async throws {
        let canonical = table.canonical
        try await connection.query(
            PostgresQuery(
                unsafeSQL: #"WITH "batch" AS (SELECT "stamp" FROM "__sync_removed" WHERE "table" = '\#(canonical)' "#
                    + #"AND "stamp" < \#(cutoff) ORDER BY "stamp" LIMIT \#(limit)), "newest" AS (SELECT max("stamp") "#
                    + #"AS "stamp" FROM "batch"), "gone" AS (DELETE FROM "__sync_removed" WHERE "table" = '\#(canonical)' "#
                    + #"AND "stamp" <= (SELECT "stamp" FROM "newest")) UPDATE "__sync_tables" SET "forgotten" = "#
                    + #"GREATEST(coalesce("forgotten", 0), (SELECT "stamp" FROM "newest")) WHERE "name" = '\#(canonical)' "#
                    + #"AND (SELECT "stamp" FROM "newest") IS NOT NULL"#),
            logger: logger)
    }

    public func removedTrace(of id: ItemID, in table: TableName, since floor: WireDate) async throws -> Bool {
        let logger = self.logger
        return try await withConnection { connection in
            let rows = try await connection.query(
                #"SELECT EXISTS (SELECT 1 FROM "__sync_removed" WHERE "table" = \#(table.canonical) AND "id" = \#(id.rawValue)) OR coalesce((SELECT "forgotten" FROM "__sync_tables" WHERE "name" = \#(table.canonical)), 0) > \#(floor.millisecondsSince1970)"#,
                logger: logger)
            var found = false
            for try await value in rows.decode(Bool.self) { found = value }
            return found
        }
    }

    /// The newest stamp the caller's rows may have now (``QueryPage/watermark``) when `query` is a pull of a table with
    /// a retention: the table's last stamp — for a per-user table, the owner's — or the table's horizon when that is
    /// later; nil for other queries, for a scope of every owner of a per-user table, and with stamps from the clock
    /// alone.
    static func watermark(
        of query: ODataQuery, _ schema: TableSchema, scope: RowScope, stamping: Stamping,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> WireDate? {
        guard PullHorizon.hasWatermark(query, schema.configuration) else { return nil }
        let table = schema.name.canonical
        let query: PostgresQuery
        switch stamping {
        case .clockOnly:
            return nil
        case .serialized where schema.configuration.perUser:
            guard let owner = scope.owner else { return nil }
            query =
                #"SELECT GREATEST((SELECT "lastStamp" FROM "__sync_owner_stamps" WHERE "table" = \#(table) AND "owner" = \#(owner)), (SELECT "horizon" FROM "__sync_tables" WHERE "name" = \#(table)))"#
        case .serialized, .tableRow:
            query = #"SELECT GREATEST("lastStamp", "horizon") FROM "__sync_tables" WHERE "name" = \#(table)"#
        }
        var stamp: Int64?
        for try await value in try await connection.query(query, logger: logger).decode(Int64?.self) { stamp = value }
        return stamp.map(WireDate.init(millisecondsSince1970:))
    }

    /// The table's horizon as the database holds it now.
    static func horizon(of table: TableName, on connection: PostgresConnection, logger: Logger) async throws
        -> WireDate?
    {
        let rows = try await connection.query(
            #"SELECT "horizon" FROM "__sync_tables" WHERE "name" = \#(table.canonical)"#, logger: logger)
        var horizon: Int64?
        for try await value in rows.decode(Int64?.self) { horizon = value }
        return horizon.map(WireDate.init(millisecondsSince1970:))
    }
}
