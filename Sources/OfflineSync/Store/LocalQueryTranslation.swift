import GRDB
import SyncCore
import SyncOData
import SyncSQL

/// Local queries: OData on rows stored as JSON, through SyncCore's translator with every field read
/// by `json_extract` (the `id` column directly).
enum LocalQueryTranslation {
    static let translator = SQLTranslator(dialect: .sqlite) { field in
        if field == SystemProperty.id.rawValue { return SQLColumn(name: "id", type: .string, isNullable: false) }
        // updatedAt has its own indexed column (the wire string, which sorts as the instant does).
        if field == SystemProperty.updatedAt.rawValue {
            return SQLColumn(name: "updatedAt", type: .dynamic, expression: "\"updatedAt\"")
        }
        // Only plain identifiers reach the JSON path: nothing from the field name is spliced otherwise.
        guard SQLDialect.sqlite.quotedIdentifier(field) != nil else { return nil }
        return SQLColumn(name: field, type: .dynamic, expression: "json_extract(\"data\", '$.\(field)')")
    }

    /// The `WHERE` condition, the `ORDER BY` terms (id last) and the arguments of a local query.
    static func clauses(_ query: ODataQuery) throws -> (where: String, orderBy: String, arguments: [SQLValue]) {
        var orderings = query.orderBy
        if !orderings.contains(where: { $0.field == SystemProperty.id.rawValue }) {
            orderings.append(ODataOrdering(SystemProperty.id.rawValue))
        }
        let predicate = try query.filter.map { try translator.predicate($0) } ?? SQLFragment("1")
        let (whereSQL, arguments) = predicate.render(for: .sqlite)
        let orderSQL = try translator.orderBy(orderings).render(for: .sqlite).sql
        return (whereSQL, orderSQL, arguments)
    }
}

/// Operations as JSON, for the error table.
enum OperationCoding {
    static func json(_ operation: PendingOperation) -> JSONValue {
        [
            "id": .int(operation.id), "table": .string(operation.table.rawValue),
            "itemID": .string(operation.itemID.rawValue), "kind": .string(operation.kind.rawValue),
            "item": operation.item ?? .null, "base": operation.base ?? .null,
            "changeSet": operation.changeSet.map(JSONValue.int) ?? .null,
        ]
    }

    static func operation(from json: JSONValue) throws -> PendingOperation {
        guard let id = json["id"]?.intValue, let table = json["table"]?.stringValue,
            let itemID = json["itemID"]?.stringValue, let kind = json["kind"]?.stringValue.flatMap(OperationKind.init)
        else { throw ValueError(kind: "stored operation", reason: "it is incomplete") }
        let item = json["item"].flatMap { $0 == .null ? nil : $0 }
        return PendingOperation(
            id: id, table: try TableName(table), itemID: try ItemID(itemID), kind: kind, item: item,
            base: json["base"].flatMap { $0 == .null ? nil : $0 }, changeSet: json["changeSet"]?.intValue)
    }

    static func json(_ attempt: PendingOperation.Attempt) -> JSONValue {
        [
            "item": attempt.item ?? .null, "version": attempt.version.map { .string($0.rawValue) } ?? .null,
            "floor": attempt.floor.map { .int($0.millisecondsSince1970) } ?? .null,
        ]
    }

    static func attempt(from json: JSONValue) throws -> PendingOperation.Attempt {
        let item = json["item"].flatMap { $0 == .null ? nil : $0 }
        return PendingOperation.Attempt(
            item: item, version: json["version"]?.stringValue.map(Version.init(rawValue:)),
            floor: json["floor"]?.intValue.map(WireDate.init(millisecondsSince1970:)))
    }
}
