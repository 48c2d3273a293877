import Foundation
import SyncCore
import SyncOData
import SyncSQL
import SyncSQLite

/// What the SQLite and PostgreSQL stores build their SQL from in the same way: quoting, column
/// lists, `$select`, the `WHERE`/`ORDER BY` of a query, and versions.
enum StoreSQL {
    /// A name already validated as an identifier, in double quotes.
    static func quoted(_ name: String) -> String {
        "\"" + name + "\""
    }

    /// The system properties' columns, in the order inserts list them.
    static let systemColumns = ["id", "createdAt", "updatedAt", "version", "deleted"]

    /// The columns and values that insert a new item stamped `stamp`: the system properties, then the
    /// plan's user columns, then the owner of a per-user table's row.
    static func insertion(id: ItemID, stamp: Int64, plan: WritePlan, owner: String?) -> (
        columns: [String], values: [SQLValue]
    ) {
        let values: [SQLValue] = [.text(id.rawValue), .int(stamp), .int(stamp), .text(version(stamp)), .bool(false)]
        let ownerColumn = owner.map { _ in [TableConfiguration.ownerColumn] } ?? []
        return (
            systemColumns + plan.values.map(\.column) + ownerColumn,
            values + plan.values.map(\.value) + (owner.map { [.text($0)] } ?? [])
        )
    }

    /// The owner a write to a per-user table stamps or is scoped to (nil for other tables).
    ///
    /// - Throws: ``TableStoreError/invalidItem(_:)`` for a per-user table and no owner.
    static func writeOwner(_ scope: RowScope, schema: TableSchema) throws(TableStoreError) -> String? {
        guard schema.configuration.perUser else { return nil }
        guard let owner = scope.owner else { throw .invalidItem("a per-user table's rows are written by their owner") }
        return owner
    }

    /// Whether `owner` may see a stored item: always outside per-user tables and for no owner (every row).
    static func isVisible(_ item: JSONValue, to owner: String?, schema: TableSchema) -> Bool {
        guard schema.configuration.perUser, let owner else { return true }
        return item[TableConfiguration.ownerColumn]?.stringValue == owner
    }

    /// The `deleted` flag an update sets, when its fields give one and the table keeps tombstones (a replace
    /// under v3 stores the flag it is given, PROTOCOL-v3.md §3; v2 never passes it).
    static func deletedAssignment(_ fields: [String: JSONValue], schema: TableSchema) -> [(
        column: String, value: SQLValue
    )] {
        guard schema.configuration.softDelete, let flag = fields[SystemProperty.deleted.rawValue]?.boolValue else {
            return []
        }
        return [(SystemProperty.deleted.rawValue, .bool(flag))]
    }

    /// The prologue of an insert or an update, in both stores: the owner it stamps or is scoped to
    /// (``writeOwner(_:schema:)``), and its fields without a value for a per-user table's owner column (the server
    /// sets it).
    ///
    /// - Throws: ``TableStoreError/invalidItem(_:)`` for a per-user table and no owner.
    static func ownedFields(_ fields: [String: JSONValue], _ scope: RowScope, schema: TableSchema)
        throws(TableStoreError) -> (owner: String?, fields: [String: JSONValue])
    {
        let owner = try writeOwner(scope, schema: schema)
        guard schema.configuration.perUser else { return (owner, fields) }
        var fields = fields
        fields[TableConfiguration.ownerColumn] = nil
        return (owner, fields)
    }

    /// The columns to read, named one by one: a cached `SELECT *` statement would keep the column
    /// list it was prepared with after a dynamic schema adds a column.
    /// Columns come in name order, so that rows can be written as JSON objects with sorted keys.
    static func columnList(_ schema: TableSchema) -> String {
        (systemColumns + schema.columns.keys).sorted().map(quoted)
            .joined(separator: ", ")
    }

    /// The user fields `$select` names (nil for all), each checked against the schema; a hidden column is as unknown,
    /// and left out when `$select` names none.
    static func selection(_ fields: [String]?, schema: TableSchema, scope: RowScope) throws(TableStoreError)
        -> Set<String>?
    {
        let columns = visibleColumns(schema, scope: scope)
        guard let fields else {
            return scope.hiddenColumns.isEmpty ? nil : Set(schema.columns.keys.filter { !scope.hides($0) })
        }
        var selected: Set<String> = []
        for field in fields {
            guard let column = columns(field) else { throw .invalidQuery("$select: unknown field '\(field)'") }
            selected.insert(column.name)
        }
        return selected
    }

    /// The columns a query may name: the table's, but for the scope's hidden ones.
    static func visibleColumns(_ schema: TableSchema, scope: RowScope) -> @Sendable (String) -> SQLColumn? {
        { field in
            guard let column = schema.column(for: field), !scope.hides(column.name) else { return nil }
            return column
        }
    }

    /// The SQL condition of the scope's filter and membership, or nil when it has neither. It may name hidden columns.
    static func scopeFilter(_ scope: RowScope, schema: TableSchema, dialect: SQLDialect) throws(TableStoreError)
        -> SQLFragment?
    {
        var conditions: [SQLFragment] = []
        // A read hook's filter compares an integer-id table's ids as a query's does (``IntegerIDs``).
        let filter = schema.configuration.integerIDs ? try IntegerIDs.storedFilter(scope.filter) : scope.filter
        if let filter {
            do {
                conditions.append(
                    SQLFragment("(")
                        + (try SQLTranslator(dialect: dialect) { schema.column(for: $0) }.predicate(filter))
                        + SQLFragment(")"))
            } catch {
                throw .invalidQuery("the table's read scope: \(error.description)")
            }
        }
        if let membership = scope.membership { conditions.append(membershipCondition(membership, dialect: dialect)) }
        return conditions.isEmpty ? nil : SQLFragment.joined(conditions, separator: " AND ")
    }

    /// The query of ``TableStore/memberships(of:in:group:exitsOf:)`` on `schema`, a members table: group, role and
    /// exit stamp (or null) of each live row of `user`.
    ///
    /// - Throws: ``TableStoreError/unavailable(_:)`` when `schema` is not a members table.
    static func membershipsQuery(of user: String, schema: TableSchema, group: String?, exitsOf: TableName?)
        throws(TableStoreError) -> SQLFragment
    {
        guard let members = schema.configuration.members else {
            throw .unavailable("table '\(schema.name)' is not a members table")
        }
        let (g, u, r) = (quoted(members.groupColumn), quoted(members.userColumn), quoted(members.roleColumn))
        var sql = SQLFragment(
            "SELECT \"__m\".\(g), \"__m\".\(r), \(exitsOf == nil ? "NULL" : "\"__e\".\"stamp\"") "
                + "FROM \(quoted(schema.name.canonical)) AS \"__m\"")
        if let exitsOf {
            sql +=
                SQLFragment(" LEFT JOIN \"\(ScopeExits.table)\" AS \"__e\" ON \"__e\".\"table\" = ")
                + SQLFragment(parameter: .text(exitsOf.canonical))
                + SQLFragment(" AND \"__e\".\"group\" = \"__m\".\(g)")
        }
        sql += SQLFragment(" WHERE \"__m\".\(u) = ") + SQLFragment(parameter: .text(user))
        if let group { sql += SQLFragment(" AND \"__m\".\(g) = ") + SQLFragment(parameter: .text(group)) }
        if schema.configuration.softDelete { sql += SQLFragment(" AND NOT \"__m\".\"deleted\"") }
        return sql
    }

    /// `("column" IN (SELECT the user's groups FROM the members table) [OR "user" = the user])`: the members table
    /// under the alias `"__m"`, so that the row's own columns (unqualified) are never taken for its. On PostgreSQL
    /// `= ANY (ARRAY(SELECT …))`: the groups are read once, and each row is checked against them (in a page of 50
    /// rows out of 10 groups' of 100, a third less execution time than the semi-join PostgreSQL planned for `IN`).
    /// With `value`, the same test of that value instead of the row's column (and without the row's user).
    static func membershipCondition(_ membership: MembershipCondition, dialect: SQLDialect, value: String? = nil)
        -> SQLFragment
    {
        let members = membership.members
        let test = dialect == .postgres ? "= ANY (ARRAY(" : "IN ("
        var sql =
            (value.map { SQLFragment("(") + SQLFragment(parameter: .text($0)) }
                ?? SQLFragment("(\(quoted(membership.column))"))
            + SQLFragment(
                " \(test)SELECT \"__m\".\(quoted(members.groupColumn)) "
                    + "FROM \(quoted(membership.membersTable.canonical)) AS \"__m\" WHERE \"__m\".\(quoted(members.userColumn)) = "
            )
            + SQLFragment(parameter: .text(membership.user))
        if membership.membersSoftDelete { sql += SQLFragment(" AND NOT \"__m\".\"deleted\"") }
        if let roles = membership.roles {
            sql +=
                SQLFragment(" AND \"__m\".\(quoted(members.roleColumn)) IN (")
                + SQLFragment.joined(roles.map { SQLFragment(parameter: .text($0.rawValue)) }, separator: ", ")
                + SQLFragment(")")
        }
        sql += SQLFragment(dialect == .postgres ? "))" : ")")
        if membership.ownRows, value == nil {
            sql += SQLFragment(" OR \(quoted(members.userColumn)) = ") + SQLFragment(parameter: .text(membership.user))
        }
        return sql + SQLFragment(")")
    }

    /// The condition that the caller may write in the group a write puts its row in (``RowScope/writtenGroup``),
    /// or nil when the write leaves the group as it is.
    static func writtenGroupCheck(_ scope: RowScope, dialect: SQLDialect) -> SQLFragment? {
        guard let group = scope.writtenGroup, let membership = scope.membership else { return nil }
        return membershipCondition(membership, dialect: dialect, value: group)
    }

    /// The refusal of a write into a group the caller may not write.
    static func forbiddenGroup(_ scope: RowScope) -> TableStoreError {
        .forbidden(
            "You may not write rows of group '\(scope.writtenGroup ?? "")': owners and editors of a group write its rows"
        )
    }

    /// The `WHERE` condition (the scope's rows — the owner's of a per-user table, those its filter passes —,
    /// tombstones excluded unless asked for) and the `ORDER BY` terms (with `id` appended so that the order is total)
    /// of a query.
    static func clauses(for query: ODataQuery, schema: TableSchema, scope: RowScope, dialect: SQLDialect)
        throws(TableStoreError) -> (where: SQLFragment, orderBy: SQLFragment)
    {
        let translator = SQLTranslator(dialect: dialect, resolveColumn: visibleColumns(schema, scope: scope))
        var conditions: [SQLFragment] = []
        if let filter = try scopeFilter(scope, schema: schema, dialect: dialect) { conditions.append(filter) }
        if schema.configuration.perUser, let owner = scope.owner {
            conditions.append(
                SQLFragment("(\(quoted(TableConfiguration.ownerColumn)) = ") + SQLFragment(parameter: .text(owner))
                    + SQLFragment(")"))
        }
        if schema.configuration.softDelete, !query.includeDeleted {
            conditions.append(SQLFragment("(NOT \"deleted\")"))
        }
        var orderings = query.orderBy
        if !orderings.contains(where: { $0.field == SystemProperty.id.rawValue }) {
            orderings.append(ODataOrdering(SystemProperty.id.rawValue))
        }
        let orderBy: SQLFragment
        // A table of integer ids compares them as stored (``IntegerIDs``), for every reader of the table.
        let filter = schema.configuration.integerIDs ? try IntegerIDs.storedFilter(query.filter) : query.filter
        do {
            if let filter { conditions.append(try translator.predicate(filter)) }
            orderBy = try translator.orderBy(orderings)
        } catch {
            throw .invalidQuery(error.description)
        }
        let always = dialect == .postgres ? "TRUE" : "1"
        let whereClause =
            conditions.isEmpty ? SQLFragment(always) : SQLFragment.joined(conditions, separator: " AND ")
        return (whereClause, orderBy)
    }

    /// The stored item, when it exists (a tombstone only with `includeDeleted`), is `owner`'s in a per-user
    /// table, and satisfies the precondition; else ``TableStoreError/notFound`` or
    /// ``TableStoreError/preconditionFailed(_:)``.
    static func checked(
        _ item: JSONValue?, schema: TableSchema, owner: String?, precondition: Precondition?, includeDeleted: Bool
    ) throws(TableStoreError) -> JSONValue {
        guard let item, !item.isDeleted || includeDeleted, isVisible(item, to: owner, schema: schema) else {
            throw .notFound
        }
        if let precondition, !precondition.isSatisfied(by: item.version ?? Version("")) {
            throw .preconditionFailed(item)
        }
        return item
    }

    /// An opaque version for a write stamped `stamp`: the stamp's 8 bytes, base64 (like a SQL Server rowversion).
    static func version(_ stamp: Int64) -> String {
        withUnsafeBytes(of: UInt64(bitPattern: stamp).bigEndian) { Data($0).base64EncodedString() }
    }

    /// The next stamp after `last` (nil for an empty table) at clock time `now`, in milliseconds:
    /// `max(now, last + 1)`, so that stamps taken one after another strictly increase.
    static func nextStamp(after last: Int64?, now: Date) -> Int64 {
        let clock = WireDate(now).millisecondsSince1970
        guard let last else { return clock }
        return max(clock, last + 1)
    }
}

/// The schemas a store has seen committed, by canonical table name. Columns are only ever added or
/// widened, so merging what any transaction saw never loses one.
final class SchemaCache: Sendable {
    private let schemas = Locked<[String: TableSchema]>([:])

    /// The cached schema of `table`, or nil.
    func schema(of table: TableName) -> TableSchema? {
        schemas.withLock { $0[table.canonical] }
    }

    /// The cached schema of `table`, or ``TableStoreError/unknownTable(_:)``.
    func require(_ table: TableName) throws(TableStoreError) -> TableSchema {
        guard let schema = schema(of: table) else { throw .unknownTable(table) }
        return schema
    }

    /// Merges a committed schema in: new columns are added, and a column widened to double stays double.
    func publish(_ schema: TableSchema) {
        schemas.withLock { cache in
            guard var merged = cache[schema.name.canonical] else {
                cache[schema.name.canonical] = schema
                return
            }
            for (name, type) in schema.columns where merged.columns[name] == nil || type == .double {
                merged.columns[name] = type
            }
            cache[schema.name.canonical] = merged
        }
    }
}

extension GroupClaim {
    /// `NOT EXISTS (…) AND …`: no row of `tables` names the group; tables the store lacks, or that lack the column
    /// (a dynamic table no row has written it to), are left out: none of their rows can name it.
    func freeCondition(columns: (TableName) -> Set<String>?) -> SQLFragment {
        var conditions: [SQLFragment] = []
        for grouped in tables {
            guard let known = columns(grouped.table) else { continue }
            let isID = grouped.column.lowercased() == SystemProperty.id.rawValue
            guard isID || known.contains(grouped.column) else { continue }
            conditions.append(
                SQLFragment(
                    "NOT EXISTS (SELECT 1 FROM \(StoreSQL.quoted(grouped.table.canonical)) WHERE "
                        + "\(StoreSQL.quoted(isID ? SystemProperty.id.rawValue : grouped.column)) = ")
                    + SQLFragment(parameter: .text(group)) + SQLFragment(")"))
        }
        guard !conditions.isEmpty else { return SQLFragment("(1 = 1)") }
        return SQLFragment("(") + SQLFragment.joined(conditions, separator: " AND ") + SQLFragment(")")
    }
}
