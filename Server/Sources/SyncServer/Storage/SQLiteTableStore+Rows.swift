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

    /// One column of a row as the wire shows it: system properties by their rules, user columns by type.
    static func member(_ column: String, _ value: DatabaseValue, schema: TableSchema) -> JSONValue {
        SQLiteRowWriter.Form(column, schema: schema).json(value)
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

/// How a page writes its rows as JSON objects, worked out once from the statement's columns (a page writes
/// thousands of rows with the same columns): which columns, in the statement's order (which
/// ``StoreSQL/columnList(_:)`` sorts), each with its `"name":` written once and how its values are written.
struct SQLiteRowWriter {
    /// How a column's values are shown: system properties by their rules, user columns by type.
    enum Form {
        case text  // id, version
        case integerID  // id, in a table of integer ids
        case date  // createdAt, updatedAt
        case flag  // deleted
        case user(SQLColumnType?)

        init(_ column: String, schema: TableSchema) {
            switch column {
            case "id" where schema.configuration.integerIDs: self = .integerID
            case "id", "version": self = .text
            case "createdAt", "updatedAt": self = .date
            case "deleted": self = .flag
            default: self = .user(schema.columns[column])
            }
        }

        /// A stored value of a column of this form, as the wire shows it.
        func json(_ value: DatabaseValue) -> JSONValue {
            switch self {
            case .text: String.fromDatabaseValue(value).map(JSONValue.string) ?? .null
            case .integerID: String.fromDatabaseValue(value).map(IntegerIDs.shown) ?? .null
            case .date:
                Int64.fromDatabaseValue(value).map { .string(WireDate(millisecondsSince1970: $0).description) } ?? .null
            case .flag: .bool((Int64.fromDatabaseValue(value) ?? 0) != 0)
            case .user(let type): SQLiteTableStore.json(value, type: type)
            }
        }
    }

    private let columns: [(index: Int, key: [UInt8], form: Form)]

    /// The writer of rows with `columnNames`, with the members `shape` and `select` keep.
    init(columnNames: [String], schema: TableSchema, select: Set<String>?, shape: RowShape) {
        columns = columnNames.enumerated().compactMap { index, name in
            guard shape.carries(name, select: select) else { return nil }
            var key: [UInt8] = []
            JSONValue.string(name).write(to: &key)
            key.append(UInt8(ascii: ":"))
            return (index, key, Form(name, schema: schema))
        }
    }

    /// Appends `row` as a JSON object.
    func write(_ row: Row, to json: inout [UInt8]) {
        json.append(UInt8(ascii: "{"))
        for (position, column) in columns.enumerated() {
            if position > 0 { json.append(UInt8(ascii: ",")) }
            json.append(contentsOf: column.key)
            let value: DatabaseValue = row[column.index]
            // Dates straight into the page (the hottest case: two per row); the rest as the form shows them.
            if case .date = column.form, let milliseconds = Int64.fromDatabaseValue(value) {
                json.append(UInt8(ascii: "\""))
                WireDate(millisecondsSince1970: milliseconds).write(to: &json)
                json.append(UInt8(ascii: "\""))
            } else {
                column.form.json(value).write(to: &json)
            }
        }
        json.append(UInt8(ascii: "}"))
    }
}
