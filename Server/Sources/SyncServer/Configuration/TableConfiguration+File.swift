public import Foundation
import SyncCore
import SyncSQL
import Yams

extension TableConfiguration {
    /// Reads table configurations from a JSON or YAML file (chosen by its `.json`, `.yaml` or `.yml`
    /// extension; other files are tried as JSON, then YAML).
    ///
    /// The shape, with every key but `name` optional:
    /// ```json
    /// {"tables": [{"name": "TodoItem", "softDelete": true, "pageSize": 50, "maxTop": 1000,
    ///              "maxColumns": 250, "maxNewColumnsPerWrite": 20,
    ///              "columns": {"text": "string", "complete": "bool"}}]}
    /// ```
    /// Column types are `string`, `int`, `double`, `bool` and `date`.
    /// - Parameter url: The file.
    /// - Returns: The tables, in file order.
    /// - Throws: ``ConfigurationError`` naming the file and every unknown key or bad value.
    public static func load(from url: URL) throws -> [TableConfiguration] {
        let text: String
        do { text = try String(contentsOf: url, encoding: .utf8) } catch {
            throw ConfigurationError("\(url.path): cannot read the file")
        }
        let document: JSONValue
        do {
            document = try parseDocument(text, isYAML: ["yaml", "yml"].contains(url.pathExtension.lowercased()))
        } catch {
            throw ConfigurationError("\(url.path): \(error)")
        }
        do { return try tables(from: document) } catch { throw ConfigurationError("\(url.path): \(error)") }
    }

    static func parseDocument(_ text: String, isYAML: Bool) throws -> JSONValue {
        if !isYAML, let json = try? JSONValue(parsing: text) { return json }
        guard let yaml = try Yams.load(yaml: text) else { throw ConfigurationError("the file is empty") }
        return try jsonValue(fromYAML: yaml)
    }

    private static func jsonValue(fromYAML value: Any) throws -> JSONValue {
        switch value {
        case let bool as Bool: return .bool(bool)
        case let int as Int: return .int(Int64(int))
        case let double as Double: return .double(double)
        case let string as String: return .string(string)
        case let array as [Any]: return .array(try array.map(jsonValue(fromYAML:)))
        case let dictionary as [String: Any]: return .object(try dictionary.mapValues(jsonValue(fromYAML:)))
        case is NSNull: return .null
        default: throw ConfigurationError("unsupported YAML value")
        }
    }

    /// The tables of a parsed configuration document.
    static func tables(from document: JSONValue) throws -> [TableConfiguration] {
        guard let root = document.objectValue else { throw ConfigurationError("the top level must be an object") }
        for key in root.keys where key != "tables" { throw ConfigurationError("unknown key '\(key)'") }
        guard let entries = root["tables"]?.arrayValue else {
            throw ConfigurationError("'tables' must be a list of tables")
        }
        var seen: Set<String> = []
        return try entries.enumerated().map { index, entry in
            let table = try table(from: entry, index: index)
            guard seen.insert(table.name.canonical).inserted else {
                throw ConfigurationError("table '\(table.name)' is configured twice")
            }
            return table
        }
    }

    private static func table(from entry: JSONValue, index: Int) throws -> TableConfiguration {
        guard let members = entry.objectValue else { throw ConfigurationError("tables[\(index)] must be an object") }
        guard let name = members["name"]?.stringValue else {
            throw ConfigurationError("tables[\(index)] needs a 'name'")
        }
        let label = "table '\(name)'"
        let known: Set<String> = [
            "name", "softDelete", "pageSize", "maxTop", "maxColumns", "maxNewColumnsPerWrite", "columns",
        ]
        for key in members.keys.sorted() where !known.contains(key) {
            throw ConfigurationError("\(label): unknown key '\(key)'")
        }
        func integer(_ key: String, default value: Int) throws -> Int {
            guard let member = members[key] else { return value }
            guard let int = member.intValue, let result = Int(exactly: int) else {
                throw ConfigurationError("\(label): '\(key)' must be a whole number")
            }
            return result
        }
        var softDelete = true
        if let member = members["softDelete"] {
            guard let bool = member.boolValue else {
                throw ConfigurationError("\(label): 'softDelete' must be true or false")
            }
            softDelete = bool
        }
        var columns: [String: SQLColumnType]?
        if let member = members["columns"] {
            guard let object = member.objectValue else {
                throw ConfigurationError("\(label): 'columns' must map column names to types")
            }
            columns = try object.mapValues { value in
                guard let text = value.stringValue, let type = SQLColumnType(configName: text) else {
                    throw ConfigurationError(
                        "\(label): column types are string, int, double, bool or date, not \(value.serialized())")
                }
                return type
            }
        }
        var table = try TableConfiguration(
            name: name, softDelete: softDelete, pageSize: try integer("pageSize", default: 50),
            maxTop: try integer("maxTop", default: 1000), columns: columns)
        table.maxColumns = try integer("maxColumns", default: table.maxColumns)
        table.maxNewColumnsPerWrite = try integer("maxNewColumnsPerWrite", default: table.maxNewColumnsPerWrite)
        try table.validate()
        return table
    }
}

extension SQLColumnType {
    /// The type named as in a configuration file: `string`, `int`, `double`, `bool` or `date`.
    init?(configName: String) {
        switch configName {
        case "string": self = .string
        case "int": self = .integer
        case "double": self = .double
        case "bool": self = .bool
        case "date": self = .date
        default: return nil
        }
    }
}
