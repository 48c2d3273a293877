import Logging
import NIOCore
import PostgresNIO
public import SyncCore
public import SyncOData
import SyncSQL

extension PostgresTableStore {
    public func query(
        _ table: TableName, _ query: ODataQuery, scope: RowScope, limit: Int, maxBytes: Int, shape: RowShape
    ) async throws
        -> QueryPage
    {
        let (page, sawNewColumn) = try await self.page(
            table, query, scope: scope, limit: limit, maxBytes: maxBytes, shape: shape,
            schema: try schemas.require(table))
        guard sawNewColumn else { return page }
        // Another instance added a column since this one cached the schema: learn its type, then
        // write the page again so that its values show as that type (a date, not a number).
        return try await self.page(
            table, query, scope: scope, limit: limit, maxBytes: maxBytes, shape: shape,
            schema: try await reloadSchema(of: table)
        ).page
    }

    private func page(
        _ table: TableName, _ query: ODataQuery, scope: RowScope, limit: Int, maxBytes: Int, shape: RowShape,
        schema: TableSchema
    ) async throws -> (page: QueryPage, sawNewColumn: Bool) {
        let (schema, select, clauses) = try await translated(table, query, scope: scope, schema: schema)
        let (whereSQL, whereArguments) = clauses.where.render(for: .postgres)
        let orderSQL = clauses.orderBy.render(for: .postgres, firstParameterIndex: whereArguments.count + 1)
        let arguments = whereArguments + orderSQL.arguments
        let name = StoreSQL.quoted(schema.name.canonical)
        let rowsSQL =
            "SELECT * FROM \(name) WHERE \(whereSQL) ORDER BY \(orderSQL.sql) LIMIT \(Int64(limit) + 1) OFFSET \(query.skip ?? 0)"
        let countSQL = query.includeTotalCount ? "SELECT COUNT(*) FROM \(name) WHERE \(whereSQL)" : nil
        let logger = self.logger
        let stamping = self.stamping
        return try await withConnection { [schema] connection in
            // Before the rows: a write that commits after this read is stamped later.
            let watermark = try await Self.watermark(
                of: query, schema, scope: scope, stamping: stamping, on: connection, logger: logger)
            var writer = RowWriter(schema: schema, select: select, shape: shape)
            var count = 0
            var hasMore = false
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: rowsSQL, binds: try Self.bindings(arguments)), logger: logger)
            for try await row in rows {
                if count == limit || writer.byteCount > maxBytes {
                    hasMore = true
                    break
                }
                try writer.append(row)
                count += 1
            }
            var total: Int?
            if let countSQL {
                let counted = try await connection.query(
                    PostgresQuery(unsafeSQL: countSQL, binds: try Self.bindings(whereArguments)), logger: logger)
                for try await value in counted.decode(Int64.self) { total = Int(value) }
            }
            // After the rows: a tombstone the page lacks was removed before this horizon was.
            let horizon =
                query.includeDeleted ? try await Self.horizon(of: schema.name, on: connection, logger: logger) : nil
            var page = QueryPage(
                itemsJSON: writer.finish(), itemCount: count, hasMore: hasMore, totalCount: total, horizon: horizon)
            page.watermark = hasMore ? nil : watermark
            return (page, writer.sawUnknownColumn)
        }
    }

    /// The query's selection and clauses on `schema` — or, when a field is unknown to it, on the schema read again (the
    /// field may be one that another instance added a moment ago), with that schema.
    private func translated(_ table: TableName, _ query: ODataQuery, scope: RowScope, schema: TableSchema) async throws
        -> (TableSchema, Set<String>?, (where: SQLFragment, orderBy: SQLFragment))
    {
        let translate = { (schema: TableSchema) throws(TableStoreError) in
            (
                select: try StoreSQL.selection(query.select, schema: schema, scope: scope),
                clauses: try StoreSQL.clauses(for: query, schema: schema, scope: scope, dialect: .postgres)
            )
        }
        do {
            let (select, clauses) = try translate(schema)
            return (schema, select, clauses)
        } catch {
            let reloaded = try await reloadSchema(of: table)
            let (select, clauses) = try translate(reloaded)
            return (reloaded, select, clauses)
        }
    }

    public func item(_ id: ItemID, in table: TableName, scope: RowScope, includeDeleted: Bool) async throws
        -> JSONValue?
    {
        var schema = try schemas.require(table)
        let logger = self.logger
        let read = { @Sendable (schema: TableSchema) in
            try await self.withConnection { connection in
                try await Self.item(id, schema: schema, scope: scope, on: connection, logger: logger)
            }
        }
        var item = try await read(schema)
        if let members = item?.objectValue, members.keys.contains(where: { !schema.knows($0) }) {
            schema = try await reloadSchema(of: table)  // a column another instance added: learn its type
            item = try await read(schema)
        }
        guard let item, !item.isDeleted || includeDeleted else { return nil }
        return scope.shown(item)
    }

    /// The stored item with `id`, tombstone or not, or nil — also when it is outside `scope` (whose filter is part
    /// of the statement that reads it).
    static func item(
        _ id: ItemID, schema: TableSchema, scope: RowScope, on connection: PostgresConnection, logger: Logger
    ) async throws -> JSONValue? {
        var sql = "SELECT * FROM \(StoreSQL.quoted(schema.name.canonical)) WHERE \"id\" = $1"
        var values: [SQLValue] = [.text(id.rawValue)]
        if let filter = try StoreSQL.scopeFilter(scope, schema: schema, dialect: .postgres) {
            let (condition, arguments) = filter.render(for: .postgres, firstParameterIndex: 2)
            sql += " AND \(condition)"
            values += arguments
        }
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: sql, binds: try bindings(values)), logger: logger)
        for try await row in rows {
            let item = try item(from: row, schema: schema)
            return StoreSQL.isVisible(item, to: scope.owner, schema: schema) ? item : nil
        }
        return nil
    }

    /// The item a row holds, as the wire shows it.
    static func item(from row: PostgresRow, schema: TableSchema) throws -> JSONValue {
        var members: [String: JSONValue] = [:]
        for cell in row where !TableConfiguration.isCollationKeyColumn(cell.columnName) {
            members[cell.columnName] = try member(cell, schema: schema)
        }
        return .object(members)
    }

    /// One cell as the wire shows it. Values are read by their database type, which is current even
    /// when another instance widened the column a moment ago; the schema tells dates and JSON apart.
    static func member(_ cell: PostgresCell, schema: TableSchema) throws -> JSONValue {
        guard cell.bytes != nil else { return .null }
        let type = schema.columns[cell.columnName]
        switch cell.columnName {
        case "createdAt", "updatedAt":
            return .string(WireDate(millisecondsSince1970: try cell.decode(Int64.self)).description)
        case "id" where schema.configuration.integerIDs:
            return IntegerIDs.shown(try cell.decode(String.self))
        default:
            break
        }
        switch cell.dataType {
        case .bool:
            return .bool(try cell.decode(Bool.self))
        case .int8, .int4, .int2:
            let int = try cell.decode(Int64.self)
            switch type {
            case .date: return .string(WireDate(millisecondsSince1970: int).description)
            case .double: return .double(Double(int))
            default: return .int(int)
            }
        case .float8, .float4:
            let double = try cell.decode(Double.self)
            if type == .integer, let int = Int64(exactly: double) { return .int(int) }
            return .double(double)
        default:
            let text = try cell.decode(String.self)
            if type == .json { return (try? JSONValue(parsing: text)) ?? .string(text) }
            return .string(text)
        }
    }

    /// Binds values in order, for `$1`, `$2`, …
    static func bindings(_ values: [SQLValue]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: bindings.appendNull()
            case .bool(let bool): bindings.append(bool)
            case .int(let int): bindings.append(int)
            case .double(let double): bindings.append(double)
            case .text(let text): bindings.append(text)
            }
        }
        return bindings
    }
}

/// Writes rows as one JSON array, each object's keys sorted. The column order is worked out once,
/// from the first row: `SELECT *` returns the columns as they are now, including any that another
/// instance added after this one cached the schema.
struct RowWriter {
    let schema: TableSchema
    let select: Set<String>?
    let shape: RowShape
    private var json: [UInt8] = [UInt8(ascii: "[")]
    private var order: [(index: Int, key: [UInt8])]?
    /// The bytes written so far.
    var byteCount: Int { json.count }
    /// Whether a row had a column the cached schema lacks (the caller then reloads the schema).
    private(set) var sawUnknownColumn = false

    init(schema: TableSchema, select: Set<String>?, shape: RowShape) {
        self.schema = schema
        self.select = select
        self.shape = shape
        json.reserveCapacity(16 * 1024)
    }

    mutating func append(_ row: PostgresRow) throws {
        let order = self.order ?? columnOrder(row)
        self.order = order
        let cells = Array(row)
        if json.count > 1 { json.append(UInt8(ascii: ",")) }
        json.append(UInt8(ascii: "{"))
        for (position, column) in order.enumerated() {
            if position > 0 { json.append(UInt8(ascii: ",")) }
            json.append(contentsOf: column.key)
            try PostgresTableStore.member(cells[column.index], schema: schema).write(to: &json)
        }
        json.append(UInt8(ascii: "}"))
    }

    /// Which cells to write, in key order, each with its `"name":` prefix ready.
    private mutating func columnOrder(_ row: PostgresRow) -> [(index: Int, key: [UInt8])] {
        var columns: [(index: Int, name: String)] = []
        for (index, cell) in row.enumerated() {
            let name = cell.columnName
            if TableConfiguration.isCollationKeyColumn(name) { continue }
            if !schema.knows(name) { sawUnknownColumn = true }
            guard shape.carries(name, select: select) else { continue }
            columns.append((index, name))
        }
        return columns.sorted { $0.name < $1.name }.map { column in
            var key: [UInt8] = []
            JSONValue.string(column.name).write(to: &key)
            key.append(UInt8(ascii: ":"))
            return (column.index, key)
        }
    }

    mutating func finish() -> [UInt8] {
        json.append(UInt8(ascii: "]"))
        return json
    }
}
