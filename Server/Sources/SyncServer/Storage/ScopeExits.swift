import SyncCore

/// The groups rows left: when a write moves a row of a shared table (``TableConfiguration/groupColumn``) to another
/// group, the group it left is recorded with the write's stamp — by a trigger of the database, in the write's own
/// transaction, whichever statement or store wrote it. The members of that group read it in their scope token
/// (``GroupRules/scopeToken(_:schema:)``): their devices, which a cursor would never tell (the moved row is out
/// of their scope now), then check which of their rows are still in it (docs/sharing.md).
enum ScopeExits {
    /// The table: one row per table and group left, with the stamp of the latest move out of it.
    static let table = "__sync_scope_exits"

    /// Creates it; `stamp` is the stamps' type.
    static func createSQL(stamp: String) -> String {
        """
        CREATE TABLE IF NOT EXISTS "\(table)" (
            "table" TEXT NOT NULL,
            "group" TEXT NOT NULL,
            "stamp" \(stamp) NOT NULL,
            PRIMARY KEY ("table", "group")
        )
        """
    }

    /// The name of a table's trigger on SQLite (PostgreSQL names triggers per table).
    static func triggerName(_ table: TableName) -> String { "__sync_exit_" + table.canonical }
}
