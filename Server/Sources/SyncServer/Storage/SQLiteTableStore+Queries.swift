import GRDB
public import SyncCore
public import SyncOData
import SyncSQL
import SyncSQLite

extension SQLiteTableStore {
    public func query(
        _ table: TableName, _ query: ODataQuery, scope: RowScope, limit: Int, maxBytes: Int, shape: RowShape
    ) async throws
        -> QueryPage
    {
        let cached = try schemas.require(table)
        let (page, schema) = try await read { db in
            let schema = try Self.committedSchema(cached, in: db)
            let page = try Self.page(
                query, scope: scope, limit: limit, maxBytes: maxBytes, shape: shape, schema: schema, in: db)
            return (page, schema)
        }
        publish(schema)
        return page
    }

    private static func page(
        _ query: ODataQuery, scope: RowScope, limit: Int, maxBytes: Int, shape: RowShape, schema: TableSchema,
        in db: Database
    ) throws -> QueryPage {
        // In the page's own read: a write that commits after it is stamped later (``nextStamp(for:now:in:)``).
        let watermark =
            PullHorizon.hasWatermark(query, schema.configuration)
            ? try newestStamp(of: schema, in: db).map(WireDate.init(millisecondsSince1970:)) : nil
        let select = try StoreSQL.selection(query.select, schema: schema, scope: scope)
        let (whereClause, orderBy) = try StoreSQL.clauses(for: query, schema: schema, scope: scope, dialect: .sqlite)
        let (whereSQL, whereArguments) = whereClause.render(for: .sqlite)
        let name = StoreSQL.quoted(schema.name.canonical)
        let rowsSQL =
            "SELECT \(StoreSQL.columnList(schema)) FROM \(name) WHERE \(whereSQL) ORDER BY \(orderBy.render(for: .sqlite).sql) LIMIT ? OFFSET ?"
        let rowsArguments = StatementArguments(
            sqlValues: whereArguments + [.int(Int64(limit) + 1), .int(Int64(query.skip ?? 0))])
        var json: [UInt8] = [UInt8(ascii: "[")]
        json.reserveCapacity(256 * min(limit, 1000))
        var count = 0
        var hasMore = false
        let statement = try db.cachedStatement(sql: rowsSQL)
        let writer = SQLiteRowWriter(columnNames: statement.columnNames, schema: schema, select: select, shape: shape)
        let rows = try Row.fetchCursor(statement, arguments: rowsArguments)
        while let row = try rows.next() {
            if count == limit || json.count > maxBytes {
                hasMore = true
                break
            }
            if count > 0 { json.append(UInt8(ascii: ",")) }
            writer.write(row, to: &json)
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
        // In the page's own read: a tombstone the page lacks was removed before this horizon was.
        let horizon = query.includeDeleted ? try Self.horizon(of: schema.name, in: db) : nil
        var page = QueryPage(itemsJSON: json, itemCount: count, hasMore: hasMore, totalCount: total, horizon: horizon)
        page.watermark = hasMore ? nil : watermark
        return page
    }

    public func item(_ id: ItemID, in table: TableName, scope: RowScope, includeDeleted: Bool) async throws
        -> JSONValue?
    {
        let cached = try schemas.require(table)
        return try await read { db in
            let schema = try Self.committedSchema(cached, in: db)
            guard let row = try Self.row(id, schema: schema, in: db) else { return nil }
            let item = Self.item(from: row, schema: schema)
            guard try Self.isInScope(item, scope, schema: schema, in: db) else { return nil }
            return item.isDeleted && !includeDeleted ? nil : scope.shown(item)
        }
    }

    static func row(_ id: ItemID, schema: TableSchema, in db: Database) throws -> Row? {
        try Row.fetchOne(
            db,
            sql:
                "SELECT \(StoreSQL.columnList(schema)) FROM \(StoreSQL.quoted(schema.name.canonical)) WHERE \"id\" = ?",
            arguments: [id.rawValue])
    }
}
