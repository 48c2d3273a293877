import Logging
import PostgresNIO
import SyncCore
import SyncSQL

/// The groups of membership-scoped writes: whether the caller may write in a group, and a claim of a free group.
extension PostgresTableStore {
    /// Whether the caller may write in the group a write puts its row in (true when it leaves the group as it is).
    func isWrittenGroupAllowed(_ scope: RowScope) async throws -> Bool {
        let logger = self.logger
        return try await withConnection { try await Self.isWrittenGroupAllowed(scope, on: $0, logger: logger) }
    }

    /// The same, on a connection (in its transaction).
    static func isWrittenGroupAllowed(_ scope: RowScope, on connection: PostgresConnection, logger: Logger)
        async throws -> Bool
    {
        guard let check = StoreSQL.writtenGroupCheck(scope, dialect: .postgres) else { return true }
        let (sql, arguments) = check.render(for: .postgres)
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT \(sql)", binds: try bindings(arguments)), logger: logger)
        for try await allowed in rows.decode(Bool?.self) { return allowed == true }
        return false
    }

    /// Refuses an insert that claims a group which is not free (``RowScope/claimedGroup``), on a connection whose
    /// transaction holds the members table locked (``lockedWrite(_:owner:_:)``): a claim that waited for another
    /// reads, in a statement after the lock, the member row that one committed.
    /// The row's own id taken passes: the insert then finds it (a retried claim is answered 409 with its row, as on
    /// SQLite, where the id is looked up first).
    static func checkClaim(
        _ scope: RowScope, id: ItemID, table: TableName, schemas: SchemaCache, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard let claim = scope.claimedGroup else { return }
        let taken =
            SQLFragment("EXISTS (SELECT 1 FROM \(StoreSQL.quoted(table.canonical)) WHERE \"id\" = ")
            + SQLFragment(parameter: .text(id.rawValue)) + SQLFragment(")")
        let (sql, arguments) =
            (taken + SQLFragment(" OR ")
            + claim.freeCondition { schemas.schema(of: $0).map { Set($0.columns.keys) } })
            .render(for: .postgres)
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT \(sql)", binds: try bindings(arguments)), logger: logger)
        for try await free in rows.decode(Bool.self) where free { return }
        throw claim.refusal
    }
}
