import GRDB
public import SyncCore
import SyncSQLite

extension SQLiteTableStore {
    public func query(_ table: TableName, _ query: ODataQuery, limit: Int) async throws -> QueryPage {
        let schema = try requireSchema(table)
        let select = try Self.selection(query.select, schema: schema)
        let (whereClause, orderBy) = try Self.clauses(for: query, schema: schema, dialect: .sqlite)
        let (whereSQL, whereArguments) = whereClause.render(for: .sqlite)
        let name = Self.quoted(schema.name.canonical)
        let rowsSQL =
            "SELECT \(Self.columnList(schema)) FROM \(name) WHERE \(whereSQL) ORDER BY \(orderBy.render(for: .sqlite).sql) LIMIT ? OFFSET ?"
        let rowsArguments = StatementArguments(
            sqlValues: whereArguments + [.int(Int64(limit) + 1), .int(Int64(query.skip ?? 0))])
        return try await read { db in
            var json: [UInt8] = [UInt8(ascii: "[")]
            json.reserveCapacity(256 * min(limit, 1000))
            var count = 0
            var hasMore = false
            let rows = try Row.fetchCursor(db.cachedStatement(sql: rowsSQL), arguments: rowsArguments)
            while let row = try rows.next() {
                if count == limit {
                    hasMore = true
                    break
                }
                if count > 0 { json.append(UInt8(ascii: ",")) }
                Self.writeItem(row, schema: schema, select: select, to: &json)
                count += 1
            }
            json.append(UInt8(ascii: "]"))
            var total: Int?
            if query.includeTotalCount {
                total = try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM \(name) WHERE \(whereSQL)",
                    arguments: StatementArguments(sqlValues: whereArguments)
                )
            }
            return QueryPage(itemsJSON: json, itemCount: count, hasMore: hasMore, totalCount: total)
        }
    }

    public func item(_ id: ItemID, in table: TableName, includeDeleted: Bool) async throws -> JSONValue? {
        let schema = try requireSchema(table)
        return try await read { db in
            guard let row = try Self.row(id, schema: schema, in: db) else { return nil }
            let item = Self.item(from: row, schema: schema)
            return item.isDeleted && !includeDeleted ? nil : item
        }
    }

    static func row(_ id: ItemID, schema: TableSchema, in db: Database) throws -> Row? {
        try Row.fetchOne(
            db, sql: "SELECT \(columnList(schema)) FROM \(quoted(schema.name.canonical)) WHERE \"id\" = ?",
            arguments: [id.rawValue])
    }

    /// The columns to read, named one by one: a cached `SELECT *` statement would keep the column
    /// list it was prepared with after a dynamic schema adds a column.
    /// Columns come in name order, so that rows can be written as JSON objects with sorted keys.
    static func columnList(_ schema: TableSchema) -> String {
        (["id", "createdAt", "updatedAt", "version", "deleted"] + schema.columns.keys).sorted().map(quoted)
            .joined(separator: ", ")
    }

    /// The user fields `$select` names (nil for all), each checked against the schema.
    static func selection(_ fields: [String]?, schema: TableSchema) throws(TableStoreError) -> Set<String>? {
        guard let fields else { return nil }
        var selected: Set<String> = []
        for field in fields {
            guard let column = schema.column(for: field) else {
                throw .invalidQuery("$select: unknown field '\(field)'")
            }
            selected.insert(column.name)
        }
        return selected
    }

    /// The `WHERE` condition (tombstones excluded unless asked for) and the `ORDER BY` terms (with
    /// `id` appended so that the order is total) of a query.
    static func clauses(for query: ODataQuery, schema: TableSchema, dialect: SQLDialect) throws(TableStoreError)
        -> (where: SQLFragment, orderBy: SQLFragment)
    {
        let translator = SQLTranslator(dialect: dialect) { schema.column(for: $0) }
        var conditions: [SQLFragment] = []
        if schema.configuration.softDelete, !query.includeDeleted {
            conditions.append(SQLFragment("(NOT \"deleted\")"))
        }
        var orderings = query.orderBy
        if !orderings.contains(where: { $0.field == SystemProperty.id.rawValue }) {
            orderings.append(ODataOrdering(SystemProperty.id.rawValue))
        }
        let orderBy: SQLFragment
        do {
            if let filter = query.filter { conditions.append(try translator.predicate(filter)) }
            orderBy = try translator.orderBy(orderings)
        } catch {
            throw .invalidQuery(error.description)
        }
        let whereClause = conditions.isEmpty ? SQLFragment("1") : SQLFragment.joined(conditions, separator: " AND ")
        return (whereClause, orderBy)
    }
}
