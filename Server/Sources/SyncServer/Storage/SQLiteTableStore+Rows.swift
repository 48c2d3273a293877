import Foundation
import GRDB
import SyncCore
import SyncSQL

extension SQLiteTableStore {
    /// The item a row holds, as the wire shows it; with `select`, only those user fields.
    static func item(from row: Row, schema: TableSchema, select: Set<String>? = nil) -> JSONValue {
        var members: [String: JSONValue] = [:]
        members.reserveCapacity(row.count)
        for (column, value) in row {
            if let select, !select.contains(column), !SystemProperty.isSystemProperty(column) { continue }
            members[column] = member(column, value, schema: schema)
        }
        return .object(members)
    }

    /// Writes a row as a JSON object (keys in the row's column order, which ``StoreSQL/columnList(_:)`` sorts), with
    /// the members `shape` and `select` keep.
    static func writeItem(
        _ row: Row, schema: TableSchema, select: Set<String>?, shape: RowShape, to json: inout [UInt8]
    ) {
        json.append(UInt8(ascii: "{"))
        var first = true
        for (column, value) in row {
            guard shape.carries(column, select: select) else { continue }
            if !first { json.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.string(column).write(to: &json)
            json.append(UInt8(ascii: ":"))
            member(column, value, schema: schema).write(to: &json)
        }
        json.append(UInt8(ascii: "}"))
    }

    /// One column of a row as the wire shows it: system properties by their rules, user columns by type.
    static func member(_ column: String, _ value: DatabaseValue, schema: TableSchema) -> JSONValue {
        switch column {
        case "id", "version":
            String.fromDatabaseValue(value).map(JSONValue.string) ?? .null
        case "createdAt", "updatedAt":
            Int64.fromDatabaseValue(value).map { .string(WireDate(millisecondsSince1970: $0).description) } ?? .null
        case "deleted":
            .bool((Int64.fromDatabaseValue(value) ?? 0) != 0)
        default:
            json(value, type: schema.columns[column])
        }
    }

    /// A stored value as JSON, by the column's type (or by its storage when the type is unknown).
    static func json(_ value: DatabaseValue, type: SQLColumnType?) -> JSONValue {
        switch (value.storage, type) {
        case (.null, _): return .null
        case (.int64(let int), .bool): return .bool(int != 0)
        case (.int64(let int), .date): return .string(WireDate(millisecondsSince1970: int).description)
        case (.int64(let int), .double): return .double(Double(int))
        case (.int64(let int), .string): return .string(String(int))
        case (.int64(let int), _): return .int(int)
        case (.double(let double), .integer): return Int64(exactly: double).map(JSONValue.int) ?? .double(double)
        case (.double(let double), _): return .double(double)
        case (.string(let text), .json): return (try? JSONValue(parsing: text)) ?? .string(text)
        case (.string(let text), _): return .string(text)
        case (.blob(let data), _): return .string(data.base64EncodedString())
        }
    }
}
