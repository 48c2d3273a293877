public import Foundation
import SyncCore
import SyncSQL
import Yams

/// What a configuration file holds: the tables, and optionally `auth`, `cors` and `fairShares`.
///
/// The shape, with every key but the tables' `name` optional (JSON, or the same in YAML):
/// ```json
/// {"auth": {"hs256Secret": "…", "jwksFile": "keys.json", "issuer": "…", "audience": "…",
///           "clockSkewSeconds": 60, "metrics": "authenticated", "openapi": "anonymous",
///           "console": {"subjects": ["alice"], "roles": ["admin"]}},
///  "cors": {"allowedOrigins": ["https://app.example.com"], "maxAgeSeconds": 600},
///  "fairShares": {"perCaller": 4, "perCallerQueue": 256, "maxRunning": 16, "maxQueued": 4096,
///                 "perCallerRate": 50, "enabled": true},
///  "tables": [{"name": "TodoItem", "softDelete": true, "pageSize": 50, "maxTop": 1000,
///              "maxColumns": 250, "maxNewColumnsPerWrite": 20, "perUser": false,
///              "access": "authenticated",
///              "columns": {"text": "string", "complete": "bool"},
///              "collations": {"text": "caseInsensitive"}, "attachments": ["photo"]}]}
/// ```
/// Column types are `string`, `int`, `double`, `bool` and `date`. An access is `anonymous`,
/// `authenticated`, `disabled` or `{"subjects": [...], "roles": [...]}`; a table's `access` is one
/// access for every operation, or `{"read": …, "insert": …, "update": …, "delete": …}`.
/// `"autoIncrement": true` gives a table integer ids the server assigns (``TableConfiguration/integerIDs``);
/// `"tombstoneRetention": SECONDS` removes its tombstones that old (``TableConfiguration/tombstoneRetention``), and
/// `"refuseStalePulls": true` answers older clients' pulls past them 410 (``TableConfiguration/refusesStalePulls``).
public struct ConfigurationFile: Sendable {
    /// The tables, in file order.
    public var tables: [TableConfiguration] = []
    /// The `auth` section, if any (a relative `jwksFile` is resolved against the file's directory).
    public var auth: AuthConfiguration?
    /// The `cors` section, if any.
    public var cors: CORSConfiguration?
    /// The `fairShares` section, if any (``FairShares``; the keys it leaves out keep their defaults).
    public var fairShares: FairShares?

    /// Reads a JSON or YAML file (chosen by its `.json`, `.yaml` or `.yml` extension; other files are
    /// tried as JSON, then YAML).
    ///
    /// - Parameter url: The file.
    /// - Throws: ``ConfigurationError`` naming the file and every unknown key or bad value.
    public init(contentsOf url: URL) throws {
        let text: String
        do { text = try String(contentsOf: url, encoding: .utf8) } catch {
            throw ConfigurationError("\(url.path): cannot read the file")
        }
        do {
            let document = try Self.parseDocument(
                text, isYAML: ["yaml", "yml"].contains(url.pathExtension.lowercased()))
            try self.init(document: document)
            if let file = auth?.jwksFile, !file.hasPrefix("/") {
                auth?.jwksFile = url.deletingLastPathComponent().appendingPathComponent(file).path
            }
        } catch {
            throw ConfigurationError("\(url.path): \(error)")
        }
    }

    /// Reads a parsed configuration document.
    init(document: JSONValue) throws {
        guard let root = document.objectValue else { throw ConfigurationError("the top level must be an object") }
        for key in root.keys.sorted() where !["tables", "auth", "cors", "fairShares"].contains(key) {
            throw ConfigurationError("unknown key '\(key)'")
        }
        if let tables = root["tables"] { self.tables = try TableConfiguration.tables(from: tables) }
        if let auth = root["auth"] { self.auth = try Self.auth(from: auth) }
        if let cors = root["cors"] { self.cors = try Self.cors(from: cors) }
        if let shares = root["fairShares"] { self.fairShares = try Self.fairShares(from: shares) }
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

    private static func auth(from value: JSONValue) throws -> AuthConfiguration {
        let members = try Members(value, label: "auth")
        try members.allow([
            "hs256Secret", "jwksFile", "issuer", "audience", "clockSkewSeconds", "metrics", "openapi", "console",
        ])
        var auth = AuthConfiguration(hs256Secret: try members.string("hs256Secret"))
        auth.jwksFile = try members.string("jwksFile")
        auth.issuer = try members.string("issuer")
        auth.audience = try members.string("audience")
        if let seconds = try members.integer("clockSkewSeconds") { auth.clockSkew = .seconds(seconds) }
        if let metrics = members["metrics"] { auth.metrics = try access(from: metrics, label: "auth.metrics") }
        if let openAPI = members["openapi"] { auth.openAPI = try access(from: openAPI, label: "auth.openapi") }
        if let console = members["console"] { auth.console = try access(from: console, label: "auth.console") }
        return auth
    }

    private static func cors(from value: JSONValue) throws -> CORSConfiguration {
        let members = try Members(value, label: "cors")
        try members.allow(["allowedOrigins", "maxAgeSeconds"])
        guard let origins = members["allowedOrigins"]?.arrayValue?.compactMap(\.stringValue),
            origins.count == members["allowedOrigins"]?.arrayValue?.count
        else { throw ConfigurationError("cors: 'allowedOrigins' must be a list of origins") }
        var cors = CORSConfiguration(allowedOrigins: origins)
        if let seconds = try members.integer("maxAgeSeconds") { cors.maxAge = .seconds(seconds) }
        return cors
    }

    private static func fairShares(from value: JSONValue) throws -> FairShares {
        let members = try Members(value, label: "fairShares")
        try members.allow(["enabled", "perCaller", "perCallerQueue", "maxRunning", "maxQueued", "perCallerRate"])
        var shares = FairShares()
        if let enabled = members["enabled"] {
            guard let on = enabled.boolValue else {
                throw ConfigurationError("fairShares: 'enabled' must be true or false")
            }
            shares.isOn = on
        }
        if let value = try members.integer("perCaller") { shares.perCaller = value }
        if let value = try members.integer("perCallerQueue") { shares.perCallerQueue = value }
        if let value = try members.integer("maxRunning") { shares.maxRunning = value }
        if let value = try members.integer("maxQueued") { shares.maxQueued = value }
        if let rate = members["perCallerRate"] {
            guard let number = rate.doubleValue ?? rate.intValue.map(Double.init) else {
                throw ConfigurationError("fairShares: 'perCallerRate' must be a number of requests a second")
            }
            shares.perCallerRate = number
        }
        try shares.validate()
        return shares
    }

    /// An access: `anonymous`, `authenticated`, `disabled`, or `{"subjects": [...], "roles": [...]}`.
    static func access(from value: JSONValue, label: String) throws -> Access {
        switch value {
        case .string("anonymous"): return .anonymous
        case .string("authenticated"): return .authenticated
        case .string("disabled"): return .disabled
        case .object:
            let members = try Members(value, label: label)
            try members.allow(["subjects", "roles"])
            let subjects = try members.strings("subjects")
            let roles = try members.strings("roles")
            guard !subjects.isEmpty || !roles.isEmpty else {
                throw ConfigurationError("\(label): name at least one subject or role")
            }
            return .restricted(subjects: subjects, roles: roles)
        default:
            throw ConfigurationError(
                "\(label): an access is anonymous, authenticated, disabled or {\"subjects\": [...], \"roles\": [...]}")
        }
    }
}

/// The members of a configuration object, read with messages that name the section and key.
private struct Members {
    let members: [String: JSONValue]
    let label: String

    init(_ value: JSONValue, label: String) throws {
        guard let members = value.objectValue else { throw ConfigurationError("\(label) must be an object") }
        self.members = members
        self.label = label
    }

    subscript(key: String) -> JSONValue? { members[key] }

    func allow(_ keys: Set<String>) throws {
        for key in members.keys.sorted() where !keys.contains(key) {
            throw ConfigurationError("\(label): unknown key '\(key)'")
        }
    }

    func string(_ key: String) throws -> String? {
        guard let member = members[key] else { return nil }
        guard let text = member.stringValue else { throw ConfigurationError("\(label): '\(key)' must be a string") }
        return text
    }

    func integer(_ key: String) throws -> Int? {
        guard let member = members[key] else { return nil }
        guard let int = member.intValue, let result = Int(exactly: int) else {
            throw ConfigurationError("\(label): '\(key)' must be a whole number")
        }
        return result
    }

    func strings(_ key: String) throws -> Set<String> {
        guard let member = members[key] else { return [] }
        guard let list = member.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
            throw ConfigurationError("\(label): '\(key)' must be a list of strings")
        }
        return Set(list.compactMap(\.stringValue))
    }
}

extension TableConfiguration {
    /// The tables of a configuration document's `tables` list.
    static func tables(from value: JSONValue) throws -> [TableConfiguration] {
        guard let entries = value.arrayValue else {
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
        let entry = TableEntry(members: members, label: "table '\(name)'")
        for key in members.keys.sorted() where !TableEntry.known.contains(key) {
            throw ConfigurationError("\(entry.label): unknown key '\(key)'")
        }
        var table = try TableConfiguration(
            name: name, softDelete: try entry.bool("softDelete", default: true),
            pageSize: try entry.integer("pageSize", default: 50),
            maxTop: try entry.integer("maxTop", default: 1000), columns: try entry.columns())
        table.maxColumns = try entry.integer("maxColumns", default: table.maxColumns)
        table.maxNewColumnsPerWrite = try entry.integer("maxNewColumnsPerWrite", default: table.maxNewColumnsPerWrite)
        table.perUser = try entry.bool("perUser", default: false)
        table.integerIDs = try entry.bool("autoIncrement", default: false)
        table.refusesStalePulls = try entry.bool("refuseStalePulls", default: false)
        if members["tombstoneRetention"] != nil {
            table.tombstoneRetention = .seconds(try entry.integer("tombstoneRetention", default: 0))
        }
        if let access = members["access"] { table.access = try tableAccess(from: access, label: entry.label) }
        try entry.readScopes(into: &table)
        try entry.readFileColumnsAndCollations(into: &table)
        try table.validate()
        return table
    }

    /// A table's `access`: one access for all operations, or one per operation.
    private static func tableAccess(from value: JSONValue, label: String) throws -> [TableOperation: Access] {
        let operations = Set(TableOperation.allCases.map(\.rawValue))
        guard let members = value.objectValue, !members.isEmpty, members.keys.allSatisfy(operations.contains) else {
            let access = try ConfigurationFile.access(from: value, label: "\(label) access")
            return Dictionary(uniqueKeysWithValues: TableOperation.allCases.map { ($0, access) })
        }
        var result: [TableOperation: Access] = [:]
        for (key, member) in members {
            result[TableOperation(rawValue: key)!] = try ConfigurationFile.access(
                from: member, label: "\(label) access.\(key)")
        }
        return result
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

/// One entry of the file's `tables`, read key by key; every error names the table.
private struct TableEntry {
    static let known: Set<String> = [
        "name", "softDelete", "pageSize", "maxTop", "maxColumns", "maxNewColumnsPerWrite", "columns", "perUser",
        "access", "collation", "collations", "claimScope", "membershipScope", "members", "attachments",
        "autoIncrement", "tombstoneRetention", "refuseStalePulls",
    ]

    let members: [String: JSONValue]
    /// `table 'NAME'`, for messages.
    let label: String

    func integer(_ key: String, default value: Int) throws -> Int {
        guard let member = members[key] else { return value }
        guard let int = member.intValue, let result = Int(exactly: int) else {
            throw ConfigurationError("\(label): '\(key)' must be a whole number")
        }
        return result
    }

    func bool(_ key: String, default value: Bool) throws -> Bool {
        guard let member = members[key] else { return value }
        guard let bool = member.boolValue else { throw ConfigurationError("\(label): '\(key)' must be true or false") }
        return bool
    }

    /// `columns`: the declared columns and their types, or nil.
    func columns() throws -> [String: SQLColumnType]? {
        guard let member = members["columns"] else { return nil }
        guard let object = member.objectValue else {
            throw ConfigurationError("\(label): 'columns' must map column names to types")
        }
        return try object.mapValues { value in
            guard let text = value.stringValue, let type = SQLColumnType(configName: text) else {
                throw ConfigurationError(
                    "\(label): column types are string, int, double, bool or date, not \(value.serialized())")
            }
            return type
        }
    }

    /// `claimScope`, `membershipScope` and `members`: who sees which rows.
    func readScopes(into table: inout TableConfiguration) throws {
        if let member = members["claimScope"] {
            guard let claim = member["claim"]?.stringValue, let column = member["column"]?.stringValue,
                member.objectValue?.count == 2
            else { throw ConfigurationError(#"\#(label): 'claimScope' is {"claim": "…", "column": "…"}"#) }
            table.claimScope = ClaimScope(claim: claim, column: column)
        }
        if let member = members["membershipScope"] {
            guard let column = member["column"]?.stringValue, let text = member["members"]?.stringValue,
                member.objectValue?.count == 2
            else { throw ConfigurationError(#"\#(label): 'membershipScope' is {"column": "…", "members": "…"}"#) }
            do { table.membershipScope = MembershipScope(column: column, members: try TableName(text)) } catch {
                throw ConfigurationError("\(label), membershipScope: \(error)")
            }
        }
        if let member = members["members"] {
            guard let group = member["group"]?.stringValue, let user = member["user"]?.stringValue,
                let role = member["role"]?.stringValue, member.objectValue?.count == 3
            else {
                throw ConfigurationError(
                    #"\#(label): 'members' is {"group": "…", "user": "…", "role": "…"} (its columns)"#)
            }
            table.members = MembersTable(groupColumn: group, userColumn: user, roleColumn: role)
        }
    }

    /// `attachments`, `collation` and `collations`.
    func readFileColumnsAndCollations(into table: inout TableConfiguration) throws {
        if let member = members["attachments"] {
            guard let list = member.arrayValue, case let names = list.compactMap(\.stringValue),
                names.count == list.count
            else { throw ConfigurationError("\(label): 'attachments' lists the columns that name files") }
            table.attachmentColumns = names
        }
        if let member = members["collation"] { table.collation = try collation(member, "collation") }
        if let member = members["collations"] {
            guard let object = member.objectValue else {
                throw ConfigurationError("\(label): 'collations' must map column names to collations")
            }
            for (column, value) in object { table.collations[column] = try collation(value, "collations.\(column)") }
        }
    }

    private func collation(_ value: JSONValue, _ key: String) throws -> Collation {
        guard let text = value.stringValue, let collation = Collation(rawValue: text) else {
            throw ConfigurationError("\(label): '\(key)' is binary or caseInsensitive, not \(value.serialized())")
        }
        return collation
    }
}
