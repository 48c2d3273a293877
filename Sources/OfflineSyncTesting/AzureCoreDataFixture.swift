public import Foundation
import GRDB
public import SyncCore

/// Writes an SQLite file in the layout Core Data gives the Azure Mobile Apps iOS SDK's `MSCoreDataStore` model —
/// `Z_PRIMARYKEY`, `Z_METADATA`, one `Z<ENTITY>` table per entity with `Z_PK`, `Z_ENT`, `Z_OPT` and a `Z<ATTRIBUTE>`
/// column per attribute, dates as seconds since 2001-01-01, booleans as integers — with the SDK's
/// `MS_TableOperations`, `MS_TableOperationErrors` and `MS_TableConfig` entities, for tests of
/// ``OfflineSync/SQLiteLocalStore/importAzureMobileAppsStore(at:tables:)`` against an app's own model.
///
/// For example:
/// ```swift
/// var old = AzureCoreDataFixture(entities: [
///     .init("TodoItem", ["text": .string, "complete": .boolean], systemColumns: true)
/// ])
/// try old.addRow("TodoItem", ["id": .string("a1"), "text": .string("Buy milk"), "complete": .bool(false)])
/// old.addOperation(table: "TodoItem", itemID: "a1", type: .insert)
/// try old.write(to: url)
/// ```
public struct AzureCoreDataFixture: Sendable {
    /// A Core Data attribute type, with the SQL type Core Data declares for it.
    public enum AttributeType: Sendable, Hashable {
        case string, integer, boolean, date, double, decimal, binary

        var sqlType: String {
            switch self {
            case .string: "VARCHAR"
            case .integer, .boolean: "INTEGER"
            case .date: "TIMESTAMP"
            case .double: "FLOAT"
            case .decimal: "DECIMAL"
            case .binary: "BLOB"
            }
        }
    }

    /// A value of an attribute.
    public enum Value: Sendable, Hashable {
        case string(String)
        case int(Int64)
        case bool(Bool)
        case date(Date)
        case double(Double)
        case data(Data)
        case null
    }

    /// An entity of the model.
    public struct Entity: Sendable, Hashable {
        /// The entity's (and table's) name.
        public var name: String
        /// Its attributes, `id` included.
        public var attributes: [String: AttributeType]

        /// Creates an entity with an `id` attribute and `attributes`; with `systemColumns`, also `version`,
        /// `createdAt`, `updatedAt` and `deleted` (named with `prefix`: `ms_` for the SDK 2 model).
        ///
        /// - Parameters:
        ///   - name: The entity's name.
        ///   - attributes: Its attributes besides `id` and the system columns.
        ///   - systemColumns: Whether it has the system columns.
        ///   - prefix: The system columns' prefix.
        public init(
            _ name: String, _ attributes: [String: AttributeType], systemColumns: Bool = true, prefix: String = ""
        ) {
            self.name = name
            var all = attributes
            if all["id"] == nil { all["id"] = .string }
            if systemColumns {
                all[prefix + "version"] = .string
                all[prefix + "createdAt"] = .date
                all[prefix + "updatedAt"] = .date
                all[prefix + "deleted"] = .boolean
            }
            self.attributes = all
        }
    }

    /// The SDK's operation types, as `MSTableOperationTypes` numbers them.
    public enum OperationType: Int64, Sendable {
        case insert = 0
        case update = 1
        case delete = 2
    }

    /// The data entities (the SDK's three are added by ``write(to:)``).
    public private(set) var entities: [Entity]
    /// The store's identity (`Z_UUID`).
    public var uuid: String
    private var rows: [String: [[String: Value]]] = [:]
    private var operations: [(id: Int64, table: String, itemID: String, properties: JSONValue)] = []
    private var errors: [(operationID: Int64, properties: JSONValue)] = []
    private var positions: [(table: String, queryID: String, value: String)] = []

    /// Creates an empty store of `entities`.
    ///
    /// - Parameters:
    ///   - entities: The app's entities.
    ///   - uuid: The store's identity.
    public init(entities: [Entity], uuid: String = UUID().uuidString) {
        self.entities = entities
        self.uuid = uuid
    }

    /// Adds a row to a data entity.
    ///
    /// - Throws: `ValueError` for an entity or attribute the model does not have.
    public mutating func addRow(_ entity: String, _ values: [String: Value]) throws {
        guard let model = entities.first(where: { $0.name == entity }) else {
            throw ValueError(kind: "entity", reason: "\(entity) is not in the model")
        }
        for name in values.keys where model.attributes[name] == nil {
            throw ValueError(kind: "attribute", reason: "\(entity) has no attribute \(name)")
        }
        rows[entity, default: []].append(values)
    }

    /// Appends an operation to the queue, as `MSTableOperation` serializes it: `properties` holds the type, and for a
    /// delete the item. Its `id` follows the last one (the SDK's sequence starts at 1).
    ///
    /// - Returns: The operation's id.
    @discardableResult
    public mutating func addOperation(table: String, itemID: String, type: OperationType, item: JSONValue? = nil)
        -> Int64
    {
        let id = (operations.last?.id ?? 0) + 1
        var properties: [String: JSONValue] = ["type": .int(type.rawValue)]
        if type == .delete, let item { properties["item"] = item }
        operations.append((id, table, itemID, .object(properties)))
        return id
    }

    /// Adds an `MSTableOperationError` of an operation, serialized as the SDK does.
    public mutating func addError(
        operationID: Int64, statusCode: Int, description: String, item: JSONValue?, serverItem: JSONValue?
    ) {
        guard let operation = operations.first(where: { $0.id == operationID }) else { return }
        var properties: [String: JSONValue] = [
            "code": statusCode == 412 ? -1303 : -1302, "domain": "com.Microsoft.MicrosoftAzureMobile.ErrorDomain",
            "description": .string(description), "table": .string(operation.table),
            "operation": operation.properties["type"] ?? 0, "itemId": .string(operation.itemID),
            "statusCode": .int(Int64(statusCode)),
        ]
        if let item { properties["item"] = item }
        if let serverItem { properties["serverItem"] = serverItem }
        errors.append((operationID, .object(properties)))
    }

    /// Records an incremental pull's delta token, as `MSQueuePullOperation` does (`keyType` 0, the date in
    /// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`).
    public mutating func addDeltaToken(table: String, queryID: String, updatedAt: WireDate) {
        positions.append((table, queryID, updatedAt.description))
    }

    /// Writes the store to `url` (which must not exist).
    ///
    /// - Throws: What SQLite throws.
    public func write(to url: URL) throws {
        let sdk = [
            Entity(
                "MS_TableConfig", ["key": .string, "keyType": .integer, "table": .string, "value": .string],
                systemColumns: false),
            Entity(
                "MS_TableOperationErrors", ["operationId": .integer, "properties": .binary, "tableKind": .integer],
                systemColumns: false),
            Entity(
                "MS_TableOperations",
                ["id": .integer, "itemId": .string, "properties": .binary, "table": .string, "tableKind": .integer],
                systemColumns: false),
        ]
        let all = (entities + sdk).sorted { $0.name < $1.name }  // Core Data numbers entities by name
        let queue = try DatabaseQueue(path: url.path)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
                    CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
                    CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB);
                    """)
            let plist = try PropertyListSerialization.data(
                fromPropertyList: ["NSStoreType": "SQLite", "NSStoreUUID": uuid], format: .binary, options: 0)
            try db.execute(
                sql: "INSERT INTO Z_METADATA (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, ?, ?)", arguments: [uuid, plist])
            for (number, entity) in all.enumerated() {
                let names = entity.attributes.keys.sorted()
                let columns = names.map { "Z\($0.uppercased()) \(entity.attributes[$0]!.sqlType)" }
                try db.execute(
                    sql:
                        "CREATE TABLE Z\(entity.name.uppercased()) (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, "
                        + columns.joined(separator: ", ") + ")")
                let records = try records(of: entity)
                for (key, record) in records.enumerated() {
                    let present = names.filter { record[$0] != nil }
                    let placeholders = Array(repeating: "?", count: present.count + 3).joined(separator: ", ")
                    let arguments: [(any DatabaseValueConvertible)?] =
                        [Int64(key + 1), Int64(number + 1), Int64(1)] + present.map { Self.stored(record[$0]!) }
                    try db.execute(
                        sql: "INSERT INTO Z\(entity.name.uppercased()) (Z_PK, Z_ENT, Z_OPT"
                            + present.map { ", Z\($0.uppercased())" }.joined() + ") VALUES (\(placeholders))",
                        arguments: StatementArguments(arguments))
                }
                try db.execute(
                    sql: "INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, 0, ?)",
                    arguments: [number + 1, entity.name, records.count])
            }
        }
        try queue.close()
    }

    private func records(of entity: Entity) throws -> [[String: Value]] {
        func data(_ json: JSONValue) -> Value { .data(json.serializedData()) }
        switch entity.name {
        case "MS_TableOperations":
            return operations.map {
                [
                    "id": .int($0.id), "table": .string($0.table), "itemId": .string($0.itemID),
                    "properties": data($0.properties), "tableKind": .int(0),
                ]
            }
        case "MS_TableOperationErrors":
            return errors.map {
                [
                    "id": .string(UUID().uuidString), "operationId": .int($0.operationID),
                    "properties": data($0.properties), "tableKind": .int(0),
                ]
            }
        case "MS_TableConfig":
            return positions.map {
                [
                    "id": .string(UUID().uuidString), "table": .string($0.table), "key": .string($0.queryID),
                    "keyType": .int(0), "value": .string($0.value),
                ]
            }
        default:
            return rows[entity.name] ?? []
        }
    }

    /// What Core Data stores for a value.
    private static func stored(_ value: Value) -> (any DatabaseValueConvertible)? {
        switch value {
        case .string(let text): text
        case .int(let number): number
        case .bool(let flag): flag ? Int64(1) : Int64(0)
        case .date(let date): date.timeIntervalSinceReferenceDate
        case .double(let number): number
        case .data(let bytes): bytes
        case .null: nil
        }
    }
}
