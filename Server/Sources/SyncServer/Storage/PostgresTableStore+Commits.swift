import Logging
import PostgresNIO
public import SyncCore
import SyncSQL

/// The outbox of committed writes (recorded in the write's own statement, leased to the after-commit hooks, removed
/// once delivered) and the memberships a scoped read or a scope token asks for.
extension PostgresTableStore {
    public func leaseCommits(limit: Int, for lease: Duration) async throws -> [CommittedWrite] {
        let now = WireDate(self.now()).millisecondsSince1970
        let until = now + lease.milliseconds
        let logger = self.logger
        let writes = try await withConnection(isWrite: true) { connection in
            let rows = try await connection.query(
                """
                UPDATE "__sync_outbox" SET "leasedUntil" = \(until) WHERE "sequence" IN (
                    SELECT "sequence" FROM "__sync_outbox" WHERE "leasedUntil" < \(now) ORDER BY "sequence"
                    LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING "sequence", "table", "kind", "item"
                """, logger: logger)
            var writes: [CommittedWrite] = []
            for try await (sequence, table, kind, item) in rows.decode((Int64, String, String, String).self) {
                if let write = CommitOutbox.write(sequence: sequence, table: table, kind: kind, item: item) {
                    writes.append(write)
                }
            }
            return writes
        }
        // The rows as PostgreSQL wrote them, as items.
        return writes.sorted { $0.sequence < $1.sequence }.map { write in
            guard let schema = schemas.schema(of: write.table) else { return write }
            return CommittedWrite(
                sequence: write.sequence, kind: write.kind, table: write.table,
                item: Self.item(fromRowJSON: write.item, schema: schema))
        }
    }

    public func memberships(of user: String, in table: TableName, group: String?, exitsOf: TableName?)
        async throws -> [Membership]
    {
        let (sql, arguments) = try StoreSQL.membershipsQuery(
            of: user, schema: try schemas.require(table), group: group, exitsOf: exitsOf
        ).render(for: .postgres)
        let logger = self.logger
        return try await withConnection { connection in
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: sql, binds: try Self.bindings(arguments)), logger: logger)
            var memberships: [Membership] = []
            for try await (group, role, exit) in rows.decode((String?, String?, Int64?).self) {
                if let group { memberships.append(Membership(group: group, role: role, exit: exit)) }
            }
            return memberships
        }
    }

    public func removeCommits(_ sequences: [Int64]) async throws {
        guard !sequences.isEmpty else { return }
        let logger = self.logger
        try await withConnection(isWrite: true) { connection in
            let rows = try await connection.query(
                #"DELETE FROM "__sync_outbox" WHERE "sequence" = ANY(\#(sequences))"#, logger: logger)
            for try await _ in rows {}
        }
    }

    /// `statement` (a write ending in `RETURNING *`), after the `WITH` list `ctes` if any; when the table records
    /// its commits, a data-modifying `WITH` that also records the rows it returns in the outbox — in the same
    /// statement, so a write to such a table still holds its stamp's lock for no round trip. The outbox keeps the row
    /// as PostgreSQL writes it (`row_to_json`); ``leaseCommits(limit:for:)`` turns it into the item.
    static func recording(_ kind: TableWrite.Kind, _ statement: String, schema: TableSchema, after ctes: String? = nil)
        -> String
    {
        guard schema.configuration.recordsCommits else { return ctes.map { "\($0) \(statement)" } ?? statement }
        // The table's name and the kind are identifiers and known words: safe as SQL literals.
        return (ctes.map { "\($0), " } ?? "WITH ") + "\"__written\" AS (\(statement)), \"__recorded\" AS ("
            + "INSERT INTO \"\(CommitOutbox.table)\" (\"table\", \"kind\", \"item\") "
            + "SELECT '\(schema.name.canonical)', '\(kind.rawValue)', row_to_json(\"__written\")::text FROM \"__written\") "
            + "SELECT * FROM \"__written\""
    }

    /// Records the row `id` as it is now in the outbox, in the caller's transaction, when the table records its
    /// commits.
    static func record(
        _ kind: TableWrite.Kind, _ id: ItemID, schema: TableSchema, on connection: PostgresConnection, logger: Logger
    ) async throws {
        guard schema.configuration.recordsCommits else { return }
        try await connection.query(
            PostgresQuery(
                unsafeSQL: "INSERT INTO \"\(CommitOutbox.table)\" (\"table\", \"kind\", \"item\") "
                    + "SELECT '\(schema.name.canonical)', '\(kind.rawValue)', row_to_json(\"t\")::text "
                    + "FROM \(StoreSQL.quoted(schema.name.canonical)) AS \"t\" WHERE \"id\" = $1",
                binds: try bindings([.text(id.rawValue)])), logger: logger)
    }
}
