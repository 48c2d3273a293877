import Crypto
import Foundation
public import SyncCore
public import SyncSQL

/// How one table behaves: soft delete, paging limits, and its columns (declared, or grown from
/// the data it receives).
///
/// For example:
/// ```swift
/// let todo = try TableConfiguration(name: "TodoItem", columns: ["text": .string, "complete": .bool])
/// ```
public struct TableConfiguration: Sendable, Hashable {
    /// The table's name, as in `/tables/{name}` (matched case-insensitively).
    public var name: TableName
    /// Whether deletes leave a tombstone (`deleted: true`) that incremental pulls see. Default true.
    public var softDelete: Bool
    /// How long a tombstone of a soft-delete table is kept before the server removes it (docs/retention.md): nil
    /// keeps every tombstone for ever (the default). A device whose pull is older than a removed tombstone is told so
    /// (``horizonHeader``) and reconciles by itself; one that syncs at least once within the retention never has to.
    /// At least one second; only with ``softDelete``.
    public var tombstoneRetention: Duration?
    /// Whether an incremental pull older than the table's horizon is answered 410 Gone ("clear the table's local data
    /// and pull it again") when the client does not say it reconciles by itself (the OfflineSync SDK says so): an Azure
    /// Mobile Apps or Datasync client would otherwise keep the rows deleted since, silently. A first download (no
    /// cursor) is answered as ever. Default false: such a client keeps those rows (docs/retention.md).
    public var refusesStalePulls = false
    /// The most rows one response carries. Default 50.
    public var pageSize: Int
    /// The largest `$top` a query may ask for; more is a 400. Default 1000.
    public var maxTop: Int
    /// The user columns and their types; nil for a dynamic schema, where a column is added on the
    /// first write that carries a field of that name, with the JSON type seen.
    public var columns: [String: SQLColumnType]?
    /// The most user fields a dynamic table may grow to; a write that would pass it is a 400. Default 250, at
    /// most 1,500 (PostgreSQL stops at 1,600 columns, system ones included).
    public var maxColumns = 250
    /// The most new fields one write may add to a dynamic table; more is a 400. Default 20.
    public var maxNewColumnsPerWrite = 20
    /// Whether each row belongs to the user who inserted it: the server stamps the caller's `sub` into a
    /// read-only `userId` column and scopes every read and write to the caller's rows. Needs
    /// ``SyncServerConfiguration/auth``. Default false.
    public var perUser = false
    /// Rows scoped by a claim of the caller's token instead (issue 32): a row belongs to the callers whose token's
    /// ``ClaimScope/claim`` equals its ``ClaimScope/column`` — a tenant, say. The server sets the column on insert,
    /// refuses a write that would move a row to another value, and shows each caller only their value's rows (another
    /// value's row is as missing, as another owner's in a per-user table). A caller without the claim is refused (403).
    public var claimScope: ClaimScope?

    /// Rows shared through a members table instead (issue 32): a row belongs to the group its
    /// ``MembershipScope/column`` names, and the members table says who belongs to each group, with which
    /// ``MemberRole``. Every member reads the group's rows, owners and editors write them (into groups they may write:
    /// a row moved to another group is refused, 403, unless they may write there too); another group's row is as
    /// missing. A page answers the caller's groups as a scope token (``scopeHeader``), which devices watch to drop the
    /// rows of a group they left and fetch all rows of one they joined.
    public var membershipScope: MembershipScope?
    /// Whether this table is the members table of membership-scoped tables: who belongs to which group, with which
    /// role. Each member sees the members of their groups and their own rows; an owner adds, changes and removes
    /// members; anyone may leave (delete their own row); the first member of a group with none is its creator, as owner.
    public var members: MembersTable?

    /// Whether the rows belong to signed-in users: per-user, claim-, membership-scoped, or a members table.
    var isScoped: Bool { perUser || claimScope != nil || membershipScope != nil || members != nil }

    /// The setting that scopes the rows, as configuration errors name it.
    var scopeKind: String {
        perUser ? "perUser" : claimScope != nil ? "claimScope" : membershipScope != nil ? "membershipScope" : "members"
    }

    /// The column that scopes the rows, if any: a per-user table's owner, a claim scope's, a membership scope's
    /// group (but `id`), a members table's user. The stores keep it as text and index it with the cursor.
    var scopeColumn: String? {
        if perUser { return Self.ownerColumn }
        if let claimScope { return claimScope.column }
        if let membershipScope {
            return membershipScope.isByID ? nil : membershipScope.column
        }
        return members?.userColumn
    }

    /// The column that names a row's group when rows may move between groups: a membership scope's (but `id`), a
    /// members table's group column. The stores record each move's group left (``ScopeExits``).
    var groupColumn: String? {
        if let membershipScope { return membershipScope.isByID ? nil : membershipScope.column }
        return members?.groupColumn
    }

    /// The name of the index of the attachment column `column`: short enough for PostgreSQL whatever the names.
    func attachmentIndex(_ column: String) -> String {
        "__sa_" + AttachmentHash(SHA256.hash(data: Data("\(name.canonical).\(column)".utf8))).hex.prefix(16)
    }

    /// Rows the server inserts when it starts and the table has none (deleted ones count): a sample's data, as the
    /// Node.js server's `table.seed`. Each may give its `id` (else one is made); not for per-user tables.
    public var seed: [JSONValue] = []
    /// The columns whose value names a file (docs/attachments.md): the SHA-256 of its bytes, as 64 lowercase hex
    /// digits, or null. A write that names a file the caller has not uploaded (or may not read) is refused, 400;
    /// the files are served under `/tables/{name}/attachments/{sha256}` to the callers who may read a row naming
    /// them, and a file no row names is collected after ``AttachmentSettings/gracePeriod``. The stores keep each
    /// column as indexed text. Default: none.
    public var attachmentColumns: [String] = []

    /// How the strings of the declared string columns compare and sort — in `$orderby` and in `eq`, `ne`, `gt`,
    /// `ge`, `lt` and `le` with a string or another such column (functions such as `startswith` compare code points):
    /// ``Collation/binary`` by default. The same order on every store: the server computes each value's
    /// ``Collation/key(_:)`` and keeps it in a column of its own (``collationKeyColumn(_:)``). Needs declared
    /// ``columns``.
    public var collation = Collation.binary
    /// Collations of single declared string columns, other than ``collation``.
    public var collations: [String: Collation] = [:]

    /// The collation of `column`: its own, else the table's, for a declared string column; binary otherwise.
    func collation(of column: String) -> Collation {
        guard columns?[column] == .string else { return .binary }
        return collations[column] ?? collation
    }

    /// Whether any column may have a collation other than binary (a write then computes keys).
    var hasCollations: Bool { collation != .binary || !collations.isEmpty }

    /// The columns whose collation is not binary.
    var collatedColumns: [String] {
        (columns ?? [:]).keys.filter { collation(of: $0) != .binary }.sorted()
    }

    /// The column that holds the collation keys of `column` (reserved: user fields cannot start with `__`).
    static func collationKeyColumn(_ column: String) -> String { "__ck_" + column }

    /// Whether `column` holds collation keys: never shown, never a field.
    static func isCollationKeyColumn(_ column: String) -> Bool { column.hasPrefix("__ck_") }

    /// Whether each committed write is also recorded in the store's outbox, in the write's own transaction, for the
    /// table's ``TableHooks/afterCommit`` hook: set by ``SyncServerConfiguration/servedTables`` for the tables that
    /// have one (and only there, so that nothing is recorded that no delivery takes).
    var recordsCommits = false
    /// Whether the server assigns the table's ids, as the integers 1, 2, 3, … (the Node.js server's
    /// `autoIncrement: true`, the ASP.NET server's integer-id entities): an insert names no id (or null or 0), and the
    /// rows' ids are JSON numbers, in paths (`/tables/T/42`) and in `$filter` (`id eq 42`, `id gt 10`) too; an id is
    /// never given again, even after its row is deleted. For the online table API of Azure Mobile Apps 2.0.0 clients:
    /// offline sync needs ids a device chooses (PROTOCOL.md §1), so the v3 dialect refuses these tables, and the
    /// OfflineSync client refuses them as sync tables. Not with a members table or a membership scope. Default: false.
    public var integerIDs = false
    /// Who may do each operation; an operation not listed takes the server's default (any signed-in user
    /// when ``SyncServerConfiguration/auth`` is set, anyone otherwise). Default: none listed.
    public var access: [TableOperation: Access] = [:]

    /// The tutorial's table: `TodoItem`, dynamic schema, soft delete.
    public static let todoItem = TableConfiguration(validName: TableName(rawValue: "TodoItem")!)

    /// Describes a table, checking every setting.
    ///
    /// - Parameters:
    ///   - name: The table's name.
    ///   - softDelete: Whether deletes leave tombstones; true by default.
    ///   - pageSize: The most rows per response; 50 by default.
    ///   - maxTop: The largest `$top` allowed; 1000 by default.
    ///   - columns: Declared user columns, or nil for a dynamic schema.
    /// - Throws: ``ConfigurationError`` for a bad name, limit or column.
    public init(
        name: String, softDelete: Bool = true, pageSize: Int = 50, maxTop: Int = 1000,
        columns: [String: SQLColumnType]? = nil
    ) throws {
        let tableName: TableName
        do { tableName = try TableName(name) } catch { throw ConfigurationError("table '\(name)': \(error)") }
        self.init(validName: tableName)
        self.softDelete = softDelete
        self.pageSize = pageSize
        self.maxTop = maxTop
        self.columns = columns
        try validate()
    }

    /// The server-managed column of a per-user table that holds each row's owner (the `sub` of its inserter).
    public static let ownerColumn = "userId"

    /// The access of `operation`: the table's own, else the server's default.
    ///
    /// - Parameters:
    ///   - operation: The operation.
    ///   - authenticates: Whether the server checks tokens (then the default is ``Access/authenticated``).
    /// - Returns: Who may do it.
    func access(_ operation: TableOperation, authenticates: Bool) -> Access {
        access[operation] ?? (authenticates ? .authenticated : .anonymous)
    }

    private init(validName: TableName) {
        name = validName
        softDelete = true
        pageSize = 50
        maxTop = 1000
        columns = nil
    }

    /// Checks every setting.
    ///
    /// - Throws: ``ConfigurationError`` naming the table and the setting.
    func validate() throws {
        let label = "table '\(name)'"
        for prefix in ["sqlite_", "pg_"] where name.canonical.hasPrefix(prefix) {
            throw ConfigurationError("\(label): names starting with '\(prefix)' are reserved by the database")
        }
        guard pageSize >= 1 else { throw ConfigurationError("\(label): pageSize must be at least 1") }
        if let tombstoneRetention {
            guard softDelete else {
                throw ConfigurationError("\(label): tombstoneRetention is for a soft-delete table (softDelete: true)")
            }
            guard tombstoneRetention >= .seconds(1) else {
                throw ConfigurationError("\(label): tombstoneRetention must be at least 1 second")
            }
        }
        guard maxTop >= 1 else { throw ConfigurationError("\(label): maxTop must be at least 1") }
        guard (1...1500).contains(maxColumns) else { throw ConfigurationError("\(label): maxColumns is 1 to 1500") }
        guard (1...maxColumns).contains(maxNewColumnsPerWrite) else {
            throw ConfigurationError("\(label): maxNewColumnsPerWrite is 1 to maxColumns")
        }
        if integerIDs, members != nil || membershipScope != nil {
            throw ConfigurationError("\(label): integer ids are not for a members table or a membership-scoped table")
        }
        try validateAttachmentColumns(label)
        try validateScopes(label)
        if isScoped, !seed.isEmpty {
            throw ConfigurationError("\(label): a scoped table has no seed (whose would it be?)")
        }
        try validateColumns(label)
    }

    /// The attachment columns: field names, declared as strings when columns are, listed once, none a scope's.
    private func validateAttachmentColumns(_ label: String) throws {
        for column in attachmentColumns {
            if let reason = FieldName.validate(column) {
                throw ConfigurationError("\(label), attachment column '\(column)': \(reason)")
            }
            if let columns, columns[column] != .string {
                throw ConfigurationError("\(label): the attachment column '\(column)' must be a declared string column")
            }
            if column == scopeColumn || column == groupColumn {
                throw ConfigurationError("\(label): '\(column)' scopes the rows; it cannot name files too")
            }
        }
        if Set(attachmentColumns).count != attachmentColumns.count {
            throw ConfigurationError("\(label): an attachment column is listed twice")
        }
    }

    /// At most one of perUser, claimScope, membershipScope and members, each with the columns it needs.
    private func validateScopes(_ label: String) throws {
        if perUser, columns?[Self.ownerColumn] != nil {
            throw ConfigurationError(
                "\(label): a perUser table keeps its owner in '\(Self.ownerColumn)'; rename that column")
        }
        if let claimScope {
            if perUser { throw ConfigurationError("\(label): a table is perUser or has a claimScope, not both") }
            if let reason = FieldName.validate(claimScope.column) {
                throw ConfigurationError("\(label), claimScope column '\(claimScope.column)': \(reason)")
            }
            if let columns, columns[claimScope.column] != .string {
                throw ConfigurationError("\(label): the claimScope column must be a declared string column")
            }
            if claimScope.claim.isEmpty { throw ConfigurationError("\(label): the claimScope needs a claim") }
        }
        let scopes = [perUser, claimScope != nil, membershipScope != nil, members != nil].filter { $0 }.count
        if scopes > 1 {
            throw ConfigurationError(
                "\(label): a table has at most one of perUser, claimScope, membershipScope and members")
        }
        if let membershipScope {
            if !membershipScope.isByID {
                if let reason = FieldName.validate(membershipScope.column) {
                    throw ConfigurationError("\(label), membershipScope column '\(membershipScope.column)': \(reason)")
                }
                if let columns, columns[membershipScope.column] != .string {
                    throw ConfigurationError("\(label): the membershipScope column must be a declared string column")
                }
            }
            if membershipScope.members.canonical == name.canonical {
                throw ConfigurationError("\(label): a table is not its own members table")
            }
        }
        if let members {
            let named = [members.groupColumn, members.userColumn, members.roleColumn]
            guard Set(named.map { $0.lowercased() }).count == 3, named.allSatisfy({ columns?[$0] == .string }) else {
                throw ConfigurationError(
                    "\(label): a members table declares its group, user and role columns: three string columns")
            }
        }
    }

    /// The declared columns and their collations.
    private func validateColumns(_ label: String) throws {
        if collation != .binary, columns == nil {
            throw ConfigurationError("\(label): a collation needs declared columns")
        }
        for (column, _) in collations where columns?[column] != .string {
            throw ConfigurationError("\(label), collations: '\(column)' is not a declared string column")
        }
        for column in collatedColumns where column.utf8.count > 58 {
            throw ConfigurationError(
                "\(label), column '\(column)': a column with a collation has at most 58 characters")
        }
        for (column, type) in columns ?? [:] {
            if let reason = FieldName.validate(column) {
                throw ConfigurationError("\(label), column '\(column)': \(reason)")
            }
            if type == .json || type == .dynamic {
                throw ConfigurationError("\(label), column '\(column)': declared columns need a fixed type")
            }
        }
    }
}

/// The claim that scopes a table's rows (``TableConfiguration/claimScope``): rows whose `column` equals the caller's
/// `claim`.
public struct ClaimScope: Sendable, Hashable {
    /// The token's claim, such as `tenant`.
    public var claim: String
    /// The row's column that holds it, such as `tenantId` (a string column).
    public var column: String

    /// A claim scope.
    ///
    /// - Parameters:
    ///   - claim: The token's claim.
    ///   - column: The column that holds it.
    public init(claim: String, column: String) {
        self.claim = claim
        self.column = column
    }
}

/// The group a membership-scoped table's rows belong to (``TableConfiguration/membershipScope``).
public struct MembershipScope: Sendable, Hashable {
    /// The row's column that names its group, such as `listId` (a string column); `id` for the groups' own table,
    /// whose every row is a group of its own (a list and its members, say).
    public var column: String
    /// The members table that says who belongs to each group (a table with ``TableConfiguration/members``).
    public var members: TableName

    /// Whether the rows are groups themselves (the column is `id`).
    var isByID: Bool { column.lowercased() == SystemProperty.id.rawValue }

    /// A membership scope.
    ///
    /// - Parameters:
    ///   - column: The row's group column.
    ///   - members: The members table.
    public init(column: String, members: TableName) {
        self.column = column
        self.members = members
    }
}

/// The columns of a members table (``TableConfiguration/members``): each row makes a user a member of a group, with
/// a role. A user with several rows in one group has the widest of their roles.
public struct MembersTable: Sendable, Hashable {
    /// The column that names the group, such as `listId`.
    public var groupColumn: String
    /// The column that names the member, as their token's `sub`, such as `userId`.
    public var userColumn: String
    /// The column that holds the member's ``MemberRole``'s name, such as `role`.
    public var roleColumn: String

    /// A members table's columns (each a declared string column).
    ///
    /// - Parameters:
    ///   - groupColumn: The group's column.
    ///   - userColumn: The member's column.
    ///   - roleColumn: The role's column.
    public init(groupColumn: String, userColumn: String, roleColumn: String) {
        self.groupColumn = groupColumn
        self.userColumn = userColumn
        self.roleColumn = roleColumn
    }
}

/// What a member may do with a group (a members table's role column holds its name).
public enum MemberRole: String, Sendable, Hashable, CaseIterable {
    /// Reads and writes the group's rows, and adds, changes and removes its members.
    case owner
    /// Reads and writes the group's rows.
    case editor
    /// Reads the group's rows.
    case viewer

    /// The roles that write a group's rows.
    static let writers: [MemberRole] = [.owner, .editor]
}

/// Why the server's configuration was refused; the message names the setting.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, naming the file, table or key.
    public let message: String

    /// Creates an error.
    ///
    /// - Parameter message: What is wrong.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}
