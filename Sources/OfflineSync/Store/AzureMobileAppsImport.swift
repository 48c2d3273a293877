public import Foundation
import GRDB
public import SyncCore

/// Moving an app from the retired Azure Mobile Apps iOS SDK without losing what its users did offline: reads the
/// SQLite file that Core Data wrote for `MSCoreDataStore` — without Core Data, so it runs on Linux too — and carries
/// its rows, its queue of pending operations (in their order), its parked operation errors and its incremental-pull
/// positions into a new ``SQLiteLocalStore``, with ``SQLiteLocalStore/importAzureMobileAppsStore(at:tables:)``.
///
/// The old store's layout is Core Data's: one table `Z<ENTITY>` per entity, a column `Z<ATTRIBUTE>` per attribute
/// (upper-cased, which is why each table's fields are named here with their JSON spelling and type), dates as
/// seconds since 2001-01-01, booleans as integers; the SDK's own entities are `MS_TableOperations`,
/// `MS_TableOperationErrors` and `MS_TableConfig`. System columns are found under either of the SDK's names: `version`,
/// `createdAt`, `updatedAt`, `deleted` (SDK 3), or `ms_version`, `ms_createdAt`, `ms_updatedAt`, `ms_deleted` (SDK 2).
public enum AzureMobileAppsImport {
    /// How a Core Data attribute becomes a field of the imported item.
    public enum FieldType: Sendable, Hashable {
        /// `String`: a JSON string.
        case string
        /// `Integer 16`, `32` or `64`: a JSON integer.
        case integer
        /// `Double`, `Float` or `Decimal`: a JSON number.
        case number
        /// `Boolean` (stored as 0 or 1): `true` or `false`.
        case boolean
        /// `Date` (stored as seconds since 2001-01-01): an ISO 8601 string with milliseconds, as the SDK sent dates.
        case date
        /// `Binary Data`: a base64 string.
        case binary
        /// An attribute the app no longer syncs: left out of the item.
        case skip
    }

    /// A table to import: the Core Data entity of the same name (the old SDK used the table's name as the entity's).
    public struct Table: Sendable, Hashable {
        /// The table's (and entity's) name.
        public var name: String
        /// The entity's attributes besides `id` and the system columns, by the name the item's JSON uses
        /// (`complete`, `dueDate`), with how to read each.
        public var fields: [String: FieldType]

        /// Creates a table to import.
        ///
        /// For example, the tutorial's:
        /// ```swift
        /// AzureMobileAppsImport.Table("TodoItem", fields: ["text": .string, "complete": .boolean])
        /// ```
        /// - Parameters:
        ///   - name: The table's name, which is the Core Data entity's.
        ///   - fields: The attributes besides `id` and the system columns, with their types.
        public init(_ name: String, fields: [String: FieldType]) {
            self.name = name
            self.fields = fields
        }
    }

    /// An incremental-pull position carried over: the next pull with this query id asks only for rows updated at or
    /// after `since`, as the old SDK's next pull would have.
    public struct Position: Sendable, Hashable, Codable {
        /// The table.
        public var table: String
        /// The query id.
        public var queryID: String
        /// The old SDK's delta token: the greatest `updatedAt` it had applied.
        public var since: WireDate
    }

    /// What an import carried.
    public struct Summary: Sendable, Hashable, Codable {
        /// The old store's identity (Core Data's `Z_UUID`).
        public var storeUUID: String
        /// Rows imported, by table.
        public var rows: [String: Int]
        /// Rows the old store held as deleted (`deleted` true) without a pending operation: left out, as a pull
        /// would have removed them.
        public var deletedRowsLeftOut: Int
        /// Pending operations, by kind, in their order in the queue.
        public var operations: [OperationKind: Int]
        /// Parked operation errors carried (conflicts and refusals, with the server's item where the SDK kept one).
        public var errors: Int
        /// Errors not carried: those without an HTTP status, or with a transient one (408, 429, 5xx); their
        /// operations are simply pushed again.
        public var errorsLeftOut: Int
        /// Incremental-pull positions carried.
        public var positions: [Position]
        /// True when the store had imported this very file before: nothing was written this time, and the other
        /// figures are those of the first import.
        public var alreadyImported: Bool

        /// The number of pending operations carried.
        public var operationCount: Int { operations.values.reduce(0, +) }
    }

    /// Why an import was refused. Nothing was written to the new store, and the old file is never written.
    public struct ImportError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The kind of refusal.
        public enum Code: Sendable, Hashable {
            /// The file is not an SQLite file, or not one that Core Data wrote for the Azure Mobile Apps SDK.
            case notAStore
            /// The file is damaged: SQLite cannot read it whole.
            case damaged
            /// The model is not one the import understands as told: an entity or attribute missing, a column not
            /// named, an operation on a table not named, a value of another type, an id the SDK accepted and the
            /// server would not.
            case unsupportedModel
            /// The new store holds data already (rows, operations, errors or positions): import into a new store.
            case storeNotEmpty
            /// The new store holds the import of another old store.
            case otherStoreImported
        }

        /// The kind of refusal.
        public var code: Code
        /// What was wrong, in one sentence.
        public var message: String

        /// The message.
        public var description: String { message }
    }
}

extension SQLiteLocalStore {
    static let azureImportKey = "import.azureMobileApps"

    /// Imports the Core Data store of the Azure Mobile Apps iOS SDK at `url` (see ``AzureMobileAppsImport``) into this
    /// store, in one transaction: the rows of `tables`, every pending operation in its order (inserts and updates push
    /// the row as it is, deletes the item the SDK kept, with its `version`), parked errors with their server items,
    /// and the `MS_TableConfig` positions, so that the first pull of each imported query id is incremental. The old
    /// file (and its `-wal`) is copied and the copy read: it is never written. Run it once, before the first sync,
    /// into a new store; running it again with the same file changes nothing.
    ///
    /// For example, at the first launch after the update:
    /// ```swift
    /// let old = URL(fileURLWithPath: documents + "/QSTodoDataModel.sqlite")
    /// if FileManager.default.fileExists(atPath: old.path) {
    ///     let summary = try await store.importAzureMobileAppsStore(
    ///         at: old, tables: [.init("TodoItem", fields: ["text": .string, "complete": .boolean])])
    ///     print("\(summary.operationCount) changes carried over")
    /// }
    /// ```
    /// - Parameters:
    ///   - url: The old store's SQLite file.
    ///   - tables: The tables to import, with their fields; every table with pending operations must be named.
    /// - Returns: What was carried (or, for a file imported before, what its first import carried).
    /// - Throws: ``AzureMobileAppsImport/ImportError`` when the file is not such a store, is damaged, has a model the
    ///   import does not understand, or when this store is not new; ``LocalStoreError`` when this store cannot be
    ///   written. In every case nothing was written. Cancellation before the write throws `CancellationError` and
    ///   writes nothing; once the write has begun it completes.
    public func importAzureMobileAppsStore(at url: URL, tables: [AzureMobileAppsImport.Table]) async throws
        -> AzureMobileAppsImport.Summary
    {
        let snapshot = try await offCooperativeThreads { try AzureStoreReader.read(url, tables: tables) }
        try Task.checkCancellation()
        return try await write { writer in try snapshot.write(into: writer) }
    }
}

/// What an old store holds, read whole before anything is written.
struct AzureStoreSnapshot: Sendable {
    struct Operation: Sendable {
        var sequence: Int64
        var table: TableName
        var itemID: ItemID
        var kind: OperationKind
        var item: JSONValue?
    }

    struct OperationErrorRecord: Sendable {
        var operationSequence: Int64
        var status: Int
        var message: String?
        var item: JSONValue?
        var serverItem: JSONValue?
    }

    var uuid: String
    var rows: [(table: TableName, items: [JSONValue])]
    var deletedRowsLeftOut: Int
    var operations: [Operation]
    var errors: [OperationErrorRecord]
    var errorsLeftOut: Int
    var positions: [(table: TableName, queryID: QueryID, since: WireDate)]

    typealias ImportError = AzureMobileAppsImport.ImportError

    func write(into writer: LocalStoreWriter) throws -> AzureMobileAppsImport.Summary {
        if let earlier = try writer.setting(SQLiteLocalStore.azureImportKey) {
            guard var summary = try? JSONDecoder().decode(AzureMobileAppsImport.Summary.self, from: Data(earlier.utf8))
            else {
                throw ImportError(code: .otherStoreImported, message: "This store records an import it cannot read")
            }
            guard summary.storeUUID == uuid else {
                throw ImportError(
                    code: .otherStoreImported,
                    message: "This store holds the import of another Azure Mobile Apps store (\(summary.storeUUID))")
            }
            summary.alreadyImported = true
            return summary
        }
        try checkEmpty(writer)
        var summary = AzureMobileAppsImport.Summary(
            storeUUID: uuid, rows: [:], deletedRowsLeftOut: deletedRowsLeftOut, operations: [:], errors: 0,
            errorsLeftOut: errorsLeftOut, positions: [], alreadyImported: false)
        for (table, items) in rows {
            try writer.prepareTable(table)
            for item in items { try writer.upsert(item, in: table) }
            summary.rows[table.rawValue] = items.count
        }
        var carried: [Int64: PendingOperation] = [:]
        for operation in operations {
            carried[operation.sequence] = try writer.enqueue(
                operation.kind, itemID: operation.itemID, in: operation.table, item: operation.item)
            summary.operations[operation.kind, default: 0] += 1
        }
        for error in errors {
            guard let operation = carried[error.operationSequence] else {
                summary.errorsLeftOut += 1  // its operation was pushed or cancelled meanwhile
                continue
            }
            try writer.saveError(
                OperationError(
                    operation: operation, status: error.status, message: error.message,
                    sentItem: operation.kind == .delete ? nil : error.item, serverItem: error.serverItem))
            summary.errors += 1
        }
        for position in positions {
            try writer.setCursor(
                PullCursor(updatedAt: position.since, itemID: nil), for: position.table, queryID: position.queryID)
            summary.positions.append(
                .init(table: position.table.rawValue, queryID: position.queryID.rawValue, since: position.since))
        }
        let record = String(decoding: try JSONEncoder().encode(summary), as: UTF8.self)
        try writer.setSetting(record, for: SQLiteLocalStore.azureImportKey)
        return summary
    }

    private func checkEmpty(_ writer: LocalStoreWriter) throws {
        var held: [String] = []
        for (table, _) in rows where try writer.hasRowTable(table) {
            if try writer.count(in: table, matching: nil) > 0 { held.append("rows of \(table)") }
        }
        if try writer.operationCount(in: nil) > 0 { held.append("pending operations") }
        if try !writer.operationErrors().isEmpty { held.append("operation errors") }
        if try Int.fetchOne(writer.db, sql: "SELECT count(*) FROM \"sync_cursors\"") ?? 0 > 0 {
            held.append("pull positions")
        }
        guard held.isEmpty else {
            throw ImportError(
                code: .storeNotEmpty,
                message: "Import into a new store: this one holds \(held.joined(separator: ", ")) already")
        }
    }
}

/// Reads an old store: a copy of its file (and `-wal`), opened with SQLite, understood through Core Data's layout.
enum AzureStoreReader {
    typealias ImportError = AzureMobileAppsImport.ImportError

    /// Seconds from 1970-01-01 to 2001-01-01, Core Data's reference date.
    static let referenceDate: Double = 978_307_200

    static func read(_ url: URL, tables: [AzureMobileAppsImport.Table]) throws -> AzureStoreSnapshot {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw ImportError(code: .notAStore, message: "No file at \(url.path)")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "OfflineSync-import-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let copy = folder.appendingPathComponent("store.sqlite")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: url, to: copy)
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: url.path + suffix) {
                try FileManager.default.copyItem(
                    at: URL(fileURLWithPath: url.path + suffix), to: URL(fileURLWithPath: copy.path + suffix))
            }
        } catch {
            throw ImportError(code: .notAStore, message: "Cannot copy \(url.path) to read it: \(error)")
        }
        do {
            let queue = try DatabaseQueue(path: copy.path)
            return try queue.read { db in try Reading(db: db, tables: tables, file: url.lastPathComponent).snapshot() }
        } catch let error as ImportError {
            throw error
        } catch let error as DatabaseError
            where error.resultCode == .SQLITE_NOTADB
        {
            throw ImportError(code: .notAStore, message: "\(url.lastPathComponent) is not an SQLite file")
        } catch let error as DatabaseError {
            throw ImportError(
                code: .damaged, message: "\(url.lastPathComponent) cannot be read whole: \(error.message ?? "\(error)")"
            )
        } catch {
            throw ImportError(code: .damaged, message: "\(url.lastPathComponent) cannot be read: \(error)")
        }
    }

    /// One read of the copy.
    struct Reading {
        let db: Database
        let tables: [AzureMobileAppsImport.Table]
        let file: String

        func unsupported(_ message: String) -> ImportError {
            ImportError(code: .unsupportedModel, message: "\(file): \(message)")
        }

        func snapshot() throws -> AzureStoreSnapshot {
            let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
            guard check == ["ok"] else {
                throw ImportError(
                    code: .damaged, message: "\(file) is damaged: \(check.prefix(3).joined(separator: "; "))")
            }
            let sqlTables = try Set(
                String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'").map { $0.uppercased() })
            guard sqlTables.contains("Z_PRIMARYKEY"), sqlTables.contains("Z_METADATA") else {
                throw ImportError(code: .notAStore, message: "\(file) is not a Core Data store (no Z_PRIMARYKEY)")
            }
            let entities = try Entities(db: db)
            guard let operations = entities["MS_TableOperations"] else {
                throw ImportError(
                    code: .notAStore,
                    message: "\(file) is a Core Data store without the Azure Mobile Apps SDK's MS_TableOperations")
            }
            let uuid = try String.fetchOne(db, sql: "SELECT Z_UUID FROM Z_METADATA") ?? ""
            var named: [String: TableName] = [:]
            for table in tables {
                guard let name = TableName(rawValue: table.name) else {
                    throw unsupported("'\(table.name)' is not a table name")
                }
                guard named[name.canonical] == nil else { throw unsupported("\(table.name) is named twice") }
                named[name.canonical] = name
            }
            var rows: [(TableName, [JSONValue])] = []
            var deletedLeftOut = 0
            let pending = try pendingItems(operations)
            for table in tables {
                let name = TableName(rawValue: table.name)!  // checked above
                guard let entity = entities[table.name] else {
                    throw unsupported("there is no entity \(table.name)")
                }
                let (items, deleted) = try self.items(of: entity, table, pending: pending[name.canonical] ?? [])
                rows.append((name, items))
                deletedLeftOut += deleted
            }
            let queue = try self.operations(operations, named: named)
            let (errors, errorsLeftOut) = try entities["MS_TableOperationErrors"].map(operationErrors) ?? ([], 0)
            let positions = try entities["MS_TableConfig"].map { try self.positions($0, named: named) } ?? []
            return AzureStoreSnapshot(
                uuid: uuid, rows: rows, deletedRowsLeftOut: deletedLeftOut, operations: queue, errors: errors,
                errorsLeftOut: errorsLeftOut, positions: positions)
        }

        /// The ids with pending operations, by canonical table name.
        private func pendingItems(_ entity: Entity) throws -> [String: Set<String>] {
            var pending: [String: Set<String>] = [:]
            for row in try entity.rows(db, attributes: ["table", "itemId"]) {
                guard let table = (row["table"] as String?).flatMap(TableName.init(rawValue:)),
                    let id = row["itemId"] as String?
                else { continue }
                pending[table.canonical, default: []].insert(id)
            }
            return pending
        }

        /// The items of a data entity, and how many deleted rows without a pending operation were left out.
        private func items(of entity: Entity, _ table: AzureMobileAppsImport.Table, pending: Set<String>) throws
            -> ([JSONValue], Int)
        {
            let system: [(field: String, names: [String], type: AzureMobileAppsImport.FieldType)] = [
                ("id", ["id"], .string), ("version", ["version", "ms_version"], .string),
                ("createdAt", ["createdAt", "ms_createdAt"], .date),
                ("updatedAt", ["updatedAt", "ms_updatedAt"], .date),
                ("deleted", ["deleted", "ms_deleted"], .boolean),
            ]
            var columns: [(field: String, column: String, type: AzureMobileAppsImport.FieldType)] = []
            var named = Set(["Z_PK", "Z_ENT", "Z_OPT"])
            for (field, names, type) in system {
                if let column = names.map(Entity.column).first(where: entity.columns.contains) {
                    columns.append((field, column, type))
                    named.insert(column)
                } else if field == "id" {
                    throw unsupported("\(table.name) has no attribute id")
                }
            }
            for (field, type) in table.fields.sorted(by: { $0.key < $1.key }) {
                let column = Entity.column(field)
                guard entity.columns.contains(column) else {
                    throw unsupported("\(table.name) has no attribute \(field) (no column \(column))")
                }
                guard !named.contains(column) else { throw unsupported("\(table.name).\(field) is a system column") }
                named.insert(column)
                if type != .skip { columns.append((field, column, type)) }
            }
            let unnamed = entity.columns.filter { !named.contains($0) && !$0.hasPrefix("Z_") }.sorted()
            guard unnamed.isEmpty else {
                throw unsupported(
                    "\(table.name) has columns the import does not name: \(unnamed.joined(separator: ", ")); "
                        + "name each in fields (.skip to leave one out)")
            }
            var items: [JSONValue] = []
            var deletedLeftOut = 0
            for row in try entity.rows(db, columns: columns.map { ($0.field, $0.column) }) {
                var item: [String: JSONValue] = [:]
                for (field, _, type) in columns {
                    item[field] = try value(row[field], type, at: "\(table.name).\(field)")
                }
                guard case .string(let id)? = item["id"], ItemID(rawValue: id) != nil else {
                    throw unsupported("a row of \(table.name) has no valid id (\(item["id"]?.serialized() ?? "null"))")
                }
                if item["deleted"] == .bool(true) && !pending.contains(id) {
                    deletedLeftOut += 1
                    continue
                }
                for field in ["version", "createdAt", "updatedAt", "deleted"] where item[field] == .null {
                    item[field] = nil  // as a row written here and never synced
                }
                items.append(.object(item))
            }
            return (items, deletedLeftOut)
        }

        private func value(_ stored: DatabaseValue, _ type: AzureMobileAppsImport.FieldType, at place: String) throws
            -> JSONValue
        {
            switch (type, stored.storage) {
            case (_, .null): return .null
            case (.string, .string(let text)): return .string(text)
            case (.integer, .int64(let integer)): return .int(integer)
            case (.integer, .double(let number)) where number.rounded() == number && abs(number) < 9e15:
                return .int(Int64(number))
            case (.number, .int64(let integer)): return .int(integer)
            case (.number, .double(let number)): return .double(number)
            case (.number, .string(let text)) where Double(text) != nil: return .double(Double(text)!)  // Decimal
            case (.boolean, .int64(let integer)) where integer == 0 || integer == 1: return .bool(integer == 1)
            case (.date, .double(let seconds)): return .string(Self.date(seconds).description)
            case (.date, .int64(let seconds)): return .string(Self.date(Double(seconds)).description)
            case (.binary, .blob(let data)): return .string(data.base64EncodedString())
            default: throw unsupported("\(place) holds \(stored), not a value of type \(type)")
            }
        }

        static func date(_ secondsSince2001: Double) -> WireDate {
            WireDate(millisecondsSince1970: Int64(((secondsSince2001 + referenceDate) * 1000).rounded()))
        }

        /// The queue, in the SDK's order (its `id`, ascending).
        private func operations(_ entity: Entity, named: [String: TableName]) throws
            -> [AzureStoreSnapshot.Operation]
        {
            var operations: [AzureStoreSnapshot.Operation] = []
            for row in try entity.rows(db, attributes: ["id", "table", "itemId", "properties"], orderBy: "id") {
                let sequence: Int64 = row["id"] ?? 0
                let tableText: String = row["table"] ?? ""
                guard let table = TableName(rawValue: tableText).flatMap({ named[$0.canonical] }) else {
                    throw unsupported(
                        "operation \(sequence) is on table '\(tableText)', which the import does not name: "
                            + "name it to carry its pending changes")
                }
                guard let itemID = (row["itemId"] as String?).flatMap(ItemID.init(rawValue:)) else {
                    throw unsupported("operation \(sequence) has no valid item id")
                }
                let properties = try json(row["properties"], at: "operation \(sequence)")
                let kinds: [Int64: OperationKind] = [0: .insert, 1: .update, 2: .delete]
                guard let type = properties["type"]?.intValue, let kind = kinds[type] else {
                    throw unsupported("operation \(sequence) has no type 0, 1 or 2: \(properties.serialized())")
                }
                let item = kind == .delete ? properties["item"] : nil
                operations.append(.init(sequence: sequence, table: table, itemID: itemID, kind: kind, item: item))
            }
            return operations
        }

        /// The parked errors worth carrying (a conflict or refusal: 4xx but 408 and 429), and how many were not.
        private func operationErrors(_ entity: Entity) throws -> ([AzureStoreSnapshot.OperationErrorRecord], Int) {
            var errors: [Int64: AzureStoreSnapshot.OperationErrorRecord] = [:]
            var leftOut = 0
            for row in try entity.rows(db, attributes: ["operationId", "properties"]) {
                let sequence: Int64 = row["operationId"] ?? 0
                let properties = try json(row["properties"], at: "the error of operation \(sequence)")
                let status = Int(properties["statusCode"]?.intValue ?? 0)
                guard (400..<500).contains(status), status != 408, status != 429 else {
                    leftOut += 1
                    continue
                }
                if errors[sequence] != nil { leftOut += 1 }  // one per operation: the latest
                errors[sequence] = .init(
                    operationSequence: sequence, status: status, message: properties["description"]?.stringValue,
                    item: properties["item"], serverItem: properties["serverItem"])
            }
            return (errors.values.sorted { $0.operationSequence < $1.operationSequence }, leftOut)
        }

        /// The delta tokens (`keyType` 0) of the named tables.
        private func positions(_ entity: Entity, named: [String: TableName]) throws
            -> [(table: TableName, queryID: QueryID, since: WireDate)]
        {
            var positions: [(table: TableName, queryID: QueryID, since: WireDate)] = []
            for row in try entity.rows(db, attributes: ["table", "key", "keyType", "value"]) {
                guard (row["keyType"] as Int64?) == 0,
                    let table = (row["table"] as String?).flatMap(TableName.init(rawValue:)),
                    let name = named[table.canonical]
                else { continue }
                let key: String = row["key"] ?? ""
                guard let queryID = QueryID(rawValue: key) else {
                    throw unsupported("the query id '\(key)' of \(table) is not one this SDK accepts (1–255, no '|')")
                }
                let value: String = row["value"] ?? ""
                guard let since = WireDate(parsing: value) else {
                    throw unsupported("the position of \(table)/\(key) is not a date: '\(value)'")
                }
                positions.append((name, queryID, since))
            }
            return positions
        }

        private func json(_ stored: DatabaseValue, at place: String) throws -> JSONValue {
            let data: Data
            switch stored.storage {
            case .blob(let blob): data = blob
            case .string(let text): data = Data(text.utf8)
            default: throw unsupported("\(place) has no properties")
            }
            do {
                return try JSONValue(parsing: data)
            } catch {
                throw unsupported("the properties of \(place) are not JSON")
            }
        }
    }

    /// Core Data's entities: `Z_PRIMARYKEY` names each, with its super-entity; an entity's rows live in its root
    /// entity's table, told apart by `Z_ENT`.
    struct Entities {
        let byName: [String: Entity]

        init(db: Database) throws {
            let rows = try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY")
            var names: [Int64: (name: String, parent: Int64)] = [:]
            for row in rows {
                guard let number = row["Z_ENT"] as Int64?, let name = row["Z_NAME"] as String? else { continue }
                names[number] = (name, row["Z_SUPER"] ?? 0)
            }
            var byName: [String: Entity] = [:]
            for (number, (name, _)) in names {
                var root = number
                var steps = 0
                while let parent = names[root]?.parent, parent != 0, steps < names.count {
                    root = parent
                    steps += 1
                }
                let table = "Z" + (names[root]?.name ?? name).uppercased()
                let columns = try Set(
                    Row.fetchAll(db, sql: "PRAGMA table_info(\(table.quotedDatabaseIdentifier))").compactMap {
                        ($0["name"] as String?)?.uppercased()
                    })
                guard !columns.isEmpty else { continue }  // an abstract entity's table may be missing
                byName[name.lowercased()] = Entity(
                    name: name, table: table, number: number, isRoot: root == number, columns: columns)
            }
            self.byName = byName
        }

        subscript(_ name: String) -> Entity? { byName[name.lowercased()] }
    }

    struct Entity {
        let name: String
        let table: String
        let number: Int64
        let isRoot: Bool
        let columns: Set<String>

        /// The column of an attribute: `Z` and its name, upper-cased.
        static func column(_ attribute: String) -> String { "Z" + attribute.uppercased() }

        /// The entity's rows, with the columns of `attributes` (`itemId` reads `ZITEMID`), each under its attribute's
        /// name; a column the entity lacks reads as null.
        func rows(_ db: Database, attributes: [String], orderBy attribute: String? = nil) throws -> [Row] {
            try rows(db, columns: attributes.map { ($0, Self.column($0)) }, orderBy: attribute.map(Self.column))
        }

        /// The entity's rows, with each of `columns` under its alias.
        func rows(_ db: Database, columns: [(alias: String, column: String)], orderBy column: String? = nil) throws
            -> [Row]
        {
            let selected = columns.map { alias, column in
                (self.columns.contains(column) ? column.quotedDatabaseIdentifier : "NULL") + " AS "
                    + alias.quotedDatabaseIdentifier
            }
            var sql = "SELECT \(selected.joined(separator: ", ")) FROM \(table.quotedDatabaseIdentifier)"
            if !isRoot { sql += " WHERE Z_ENT = \(number)" }
            sql += " ORDER BY " + (column.map { "\($0.quotedDatabaseIdentifier), " } ?? "") + "Z_PK"
            return try Row.fetchAll(db, sql: sql)
        }
    }
}
