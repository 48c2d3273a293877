import Foundation
import GRDB
import SyncCore

/// Reads an old store: a copy of its file (and `-wal`), opened with SQLite, understood through Core Data's layout.
enum AzureStoreReader {
    typealias ImportError = AzureMobileAppsImport.ImportError

    /// Seconds from 1970-01-01 to 2001-01-01, Core Data's reference date.
    static let referenceDate: Double = 978_307_200

    /// Reads the old store at `url` through a copy made in `database`'s working folder (``ImportWorkingCopies``).
    static func read(_ url: URL, tables: [AzureMobileAppsImport.Table], beside database: String) throws
        -> AzureStoreSnapshot
    {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw ImportError(code: .notAStore, message: "No file at \(url.path)")
        }
        do {
            return try ImportWorkingCopies.with(for: database) { folder in
                try read(url, tables: tables, copy: folder.appendingPathComponent("store.sqlite"))
            }
        } catch let error as ImportError {
            throw error
        } catch {
            throw ImportError(code: .notAStore, message: "Cannot copy \(url.path) to read it: \(error)")
        }
    }

    private static func read(_ url: URL, tables: [AzureMobileAppsImport.Table], copy: URL) throws
        -> AzureStoreSnapshot
    {
        do {
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
