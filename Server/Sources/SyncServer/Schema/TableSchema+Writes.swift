import SyncCore
import SyncSQL

/// What a write needs: the values to store, and the schema changes a dynamic table makes first.
struct WritePlan: Sendable {
    /// User columns and the values to store in them.
    var values: [(column: String, value: SQLValue)] = []
    /// Columns to add before writing.
    var newColumns: [(name: String, type: SQLColumnType)] = []
    /// Integer columns that received a fraction and become double columns.
    var widenedColumns: [String] = []

    var changesSchema: Bool { !newColumns.isEmpty || !widenedColumns.isEmpty }
}

extension TableSchema {
    /// The fields with each user field named as its column is declared (or was first written), when the client spelled
    /// it in another case: columns are matched without case, as on the SQL Server-backed servers (issue 50), and
    /// stored under one name. Fields that match no column, and system properties, keep their names.
    ///
    /// - Throws: ``TableStoreError/invalidItem(_:)`` when two fields name one column.
    func declaredNames(_ fields: [String: JSONValue]) throws(TableStoreError) -> [String: JSONValue] {
        let other = fields.keys.filter { columns[$0] == nil && !SystemProperty.isSystemProperty($0) }
        guard !other.isEmpty else { return fields }
        // Names are ASCII (the body's parse limits), so lowercasing them is per byte.
        let declared = Dictionary(columns.keys.map { ($0.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
        var renamed = fields
        var namedBy: [String: String] = [:]  // column → the field that names it
        for field in fields.keys where columns[field] != nil { namedBy[field] = field }
        for field in other.sorted() {
            guard let name = declared[field.lowercased()] else { continue }
            if let first = namedBy.updateValue(field, forKey: name) {
                throw .invalidItem(
                    "fields '\(min(first, field))' and '\(max(first, field))' name one column, '\(name)'")
            }
            renamed[name] = renamed.removeValue(forKey: field)
        }
        return renamed
    }

    /// Checks an item's user fields against the schema and turns them into column values.
    ///
    /// System properties in `fields` are skipped (the caller deals with `id` and `version`; the others
    /// are server-managed). A null for a column a dynamic table does not have yet adds nothing.
    /// - Throws: ``TableStoreError/invalidItem(_:)`` naming the field and the rule it breaks.
    func plan(_ fields: [String: JSONValue]) throws(TableStoreError) -> WritePlan {
        var plan = WritePlan()
        var newNames: [String: String] = [:]  // a new field's name, lowercased → as written
        for (field, value) in fields.sorted(by: { $0.key < $1.key }) {
            if SystemProperty.isSystemProperty(field) { continue }
            if let reason = FieldName.validate(field) { throw .invalidItem("field '\(field)': \(reason)") }
            if columns[field] == nil,
                let other = columns.keys.first(where: { $0.lowercased() == field.lowercased() })
            {
                throw .invalidItem("field '\(field)' differs from the existing field '\(other)' only in case")
            }
            guard let kind = FieldKind(value) else {
                if columns[field] != nil {
                    plan.values.append((field, .null))
                } else if !isDynamic {
                    throw .invalidItem("field '\(field)' is not a column of this table")
                }
                continue
            }
            if kind == .json, !isDynamic {
                throw .invalidItem("field '\(field)': nested objects and arrays are not allowed in this table")
            }
            guard let type = columns[field] else {
                guard isDynamic else { throw .invalidItem("field '\(field)' is not a column of this table") }
                // SQLite's column names ignore case and PostgreSQL's quoted ones do not: neither store gets two.
                if let other = newNames.updateValue(field, forKey: field.lowercased()) {
                    throw .invalidItem("field '\(field)' differs from the field '\(other)' only in case")
                }
                plan.newColumns.append((field, kind.columnType))
                plan.values.append((field, try Self.sqlValue(value, as: kind.columnType, field: field)))
                continue
            }
            var target = type
            if type == .integer, kind == .double {
                if isDynamic { target = .double; plan.widenedColumns.append(field) }
            }
            plan.values.append((field, try Self.sqlValue(value, as: target, field: field)))
        }
        // The collation keys of the strings written to columns with a collation, computed here for every store.
        for (column, value) in plan.values where configuration.hasCollations {
            let collation = configuration.collation(of: column)
            guard collation != .binary else { continue }
            let key: SQLValue =
                if case .text(let text) = value, let key = collation.key(text) { .text(key) } else { .null }
            plan.values.append((TableConfiguration.collationKeyColumn(column), key))
        }
        let limits = configuration
        if plan.newColumns.count > limits.maxNewColumnsPerWrite {
            throw .invalidItem(
                "it adds \(plan.newColumns.count) new fields; one write may add at most \(limits.maxNewColumnsPerWrite)"
            )
        }
        if !plan.newColumns.isEmpty, columns.count + plan.newColumns.count > limits.maxColumns {
            throw .invalidItem(
                "the table would have \(columns.count + plan.newColumns.count) fields; it may have at most \(limits.maxColumns)"
            )
        }
        return plan
    }

    /// The schema with a plan's changes applied.
    func applying(_ plan: WritePlan) -> TableSchema {
        var schema = self
        for (name, type) in plan.newColumns { schema.columns[name] = type }
        for name in plan.widenedColumns { schema.columns[name] = .double }
        return schema
    }

    /// Converts a JSON value for a column of `type`, or explains why it does not fit.
    static func sqlValue(_ value: JSONValue, as type: SQLColumnType, field: String) throws(TableStoreError) -> SQLValue
    {
        switch (type, value) {
        case (_, .null): return .null
        case (.string, .string(let text)):
            // PostgreSQL text cannot hold NUL; refused on every store, so that both behave the same.
            if text.utf8.contains(0) { throw .invalidItem("field '\(field)': strings cannot contain U+0000 (NUL)") }
            return .text(text)
        case (.date, .string(let text)):
            guard let date = WireDate(parsing: text) else {
                throw .invalidItem(
                    "field '\(field)' holds dates; '\(text)' is not a date such as 2024-01-31T12:00:00.000Z")
            }
            return .int(date.millisecondsSince1970)
        case (.integer, .int(let int)): return .int(int)
        case (.integer, .double(let double)):
            guard let int = Int64(exactly: double) else {
                throw .invalidItem("field '\(field)' holds integers; \(double) is not one")
            }
            return .int(int)
        case (.double, .int(let int)):
            // A double holds every integer up to 2^53 exactly; past that it would round silently — unless the digits
            // are a double's shortest form, as JavaScript writes every number: that client held the double.
            guard int.magnitude <= 1 << 53 || SQLColumnType.isShortestForm(ofDouble: int) else {
                throw .invalidItem(
                    "field '\(field)' holds doubles, which keep integers exactly only up to 2^53; \(int) is larger")
            }
            return .double(Double(int))
        case (.double, .double(let double)): return .double(double)
        case (.bool, .bool(let bool)): return .bool(bool)
        case (.json, .array), (.json, .object): return .text(value.serialized())
        default:
            throw .invalidItem(
                "field '\(field)' holds \(type.noun); got \(FieldKind(value)?.columnType.noun ?? "null")")
        }
    }
}

/// The kind of a JSON value, as a dynamic schema types a new column.
enum FieldKind: Equatable {
    case string, date, int, double, bool, json

    /// The kind of `value`, or nil for null.
    init?(_ value: JSONValue) {
        switch value {
        case .null: return nil
        case .bool: self = .bool
        case .int: self = .int
        case .double: self = .double
        case .string(let text): self = WireDate(parsing: text) == nil ? .string : .date
        case .array, .object: self = .json
        }
    }

    var columnType: SQLColumnType {
        switch self {
        case .string: .string
        case .date: .date
        case .int: .integer
        case .double: .double
        case .bool: .bool
        case .json: .json
        }
    }
}

extension SQLColumnType {
    /// What a column of this type holds, for messages: "strings", "dates", …
    var noun: String {
        switch self {
        case .string: "strings"
        case .integer: "integers"
        case .double: "numbers"
        case .bool: "true or false"
        case .date: "dates"
        case .json: "objects or arrays"
        case .dynamic: "any value"
        }
    }

    /// Whether `int`'s digits are the shortest decimal form of the double nearest it (`1152921504606847000` for
    /// 2^60, as JavaScript's `JSON.stringify` writes it), so that storing that double keeps what the client meant.
    /// An integer from a 64-bit client (`1152921504606846975`) is not: its double would lose digits.
    static func isShortestForm(ofDouble int: Int64) -> Bool {
        let text = "\(Double(int.magnitude))"  // "1.152921504606847e+18", or "9007199254740994.0" below 1e16
        let digits: Substring
        let exponent: Int
        if let e = text.firstIndex(of: "e") {
            guard let power = Int(text[text.index(after: e)...]) else { return false }
            (digits, exponent) = (Substring(text[..<e].filter { $0 != "." }), power)
        } else {
            guard text.hasSuffix(".0") else { return false }
            (digits, exponent) = (text.dropLast(2), text.count - 3)
        }
        guard exponent + 1 >= digits.count else { return false }
        return digits + String(repeating: "0", count: exponent + 1 - digits.count) == String(int.magnitude)
    }
}
