import Foundation
public import SyncCore
public import SyncOData

// Which rows a caller may see, as a store reads them: memberships of groups, the claims that make them, a row's scope
// and the shape a read takes.

/// A row of a members table that makes a user a member of a group (``TableStore/memberships(of:in:group:exitsOf:)``).
public struct Membership: Sendable, Hashable {
    /// The group.
    public var group: String
    /// The role's name, as stored.
    public var role: String?
    /// The stamp of the latest move of a row of the shared table asked about out of the group, if any.
    public var exit: Int64?

    /// A membership.
    ///
    /// - Parameters:
    ///   - group: The group.
    ///   - role: The role's name.
    ///   - exit: The stamp of the latest move out of the group, if any.
    public init(group: String, role: String?, exit: Int64?) {
        self.group = group
        self.role = role
        self.exit = exit
    }
}

/// The rows of a membership-scoped table (or of a members table) a user reaches: those whose `column` names a group
/// the user is a member of — with one of `roles`, or any — and, with `ownRows`, a members table's rows of the user.
struct MembershipCondition: Sendable, Hashable {
    /// The row's group column.
    var column: String
    /// The members table.
    var membersTable: TableName
    /// Its columns.
    var members: MembersTable
    /// Whether its deleted rows are tombstones (which make nobody a member).
    var membersSoftDelete: Bool
    /// The user.
    var user: String
    /// The roles that count (nil: any).
    var roles: [MemberRole]?
    /// Whether a members table's rows whose user column is the user pass too.
    var ownRows = false
}

/// A group that a new member row claims for its creator. The group is free when no row of the members table names
/// it (a tombstone included: a group whose members all left is not free) and no row of a table it scopes belongs to
/// it (a row kept after its members left is not a stranger's to inherit). Checked in the insert's transaction —
/// on PostgreSQL with the members table locked, so that of several callers claiming one group at once one wins.
struct GroupClaim: Sendable, Hashable {
    /// A table whose rows belong to groups, and its column that names the group (`id` for a table scoped by id).
    struct GroupedTable: Sendable, Hashable {
        var table: TableName
        var column: String
    }

    /// The group.
    var group: String
    /// The members table and the tables its groups scope.
    var tables: [GroupedTable]

    /// The refusal of a claim of a group that is not free.
    var refusal: TableStoreError {
        .forbidden(
            "Group '\(group)' is taken: only an owner of a group adds its members (the first member of a new group is "
                + "its creator, as owner)")
    }
}

/// The rows a store call may see and write, and the columns it may not show: the caller's share of a table.
public struct RowScope: Sendable, Hashable {
    /// The owner of a per-user table's rows the call is limited to; nil for every owner's (read only). Ignored for
    /// other tables.
    public var owner: String?
    /// A condition rows must meet, on top of the owner (nil: none); it may name hidden columns.
    public var filter: ODataExpression?
    /// Columns left out of every item and page, and unknown to a query's `$filter`, `$orderby` and `$select`.
    public var hiddenColumns: Set<String>
    /// The values the caller's scope gives columns (a claim scope's column): set on insert, and a write may not
    /// change them. The server's, set with the filter that goes with them.
    var stamped: [String: JSONValue] = [:]
    /// The groups of a membership-scoped table (or a members table) the caller reaches through their memberships: the
    /// server's, as ``stamped``.
    var membership: MembershipCondition?
    /// The group a write of a membership-scoped table puts the row in, when it sets the group column: the store checks
    /// it against ``membership`` in the write itself (``TableStoreError/forbidden(_:)`` when the caller may not write
    /// there); nil when the write leaves the column as it is.
    var writtenGroup: String?
    /// The group an insert into a members table claims, as its first member: the store makes the row only when, in
    /// the write's own transaction, the group is free (``GroupClaim``), and refuses it otherwise
    /// (``TableStoreError/forbidden(_:)``).
    var claimedGroup: GroupClaim?

    /// A scope.
    ///
    /// - Parameters:
    ///   - owner: The owner of a per-user table's rows (nil: every owner's, read only).
    ///   - filter: A condition rows must meet.
    ///   - hiddenColumns: Columns never shown.
    public init(owner: String? = nil, filter: ODataExpression? = nil, hiddenColumns: Set<String> = []) {
        self.owner = owner
        self.filter = filter
        self.hiddenColumns = hiddenColumns
    }

    /// Every row and column (of every owner, read only in a per-user table): the console's and tools' scope.
    public static let everything = RowScope()

    /// Whether `column` is one of the hidden columns (names compare without regard to case, as columns do).
    func hides(_ column: String) -> Bool {
        !hiddenColumns.isEmpty && hiddenColumns.contains { $0.caseInsensitiveCompare(column) == .orderedSame }
    }

    /// `item` without the hidden columns.
    func shown(_ item: JSONValue) -> JSONValue {
        guard !hiddenColumns.isEmpty, case .object(let members) = item else { return item }
        return .object(members.filter { !hides($0.key) })
    }

    /// Runs a store call whose item, and the item a conflict carries, are shown without the hidden columns.
    func showing(_ body: () async throws -> JSONValue) async throws -> JSONValue {
        guard !hiddenColumns.isEmpty else { return try await body() }
        do {
            return shown(try await body())
        } catch TableStoreError.alreadyExists(let stored) {
            throw TableStoreError.alreadyExists(shown(stored))
        } catch TableStoreError.preconditionFailed(let stored) {
            throw TableStoreError.preconditionFailed(shown(stored))
        }
    }
}

/// Which system properties a page's rows carry, so that a store writes each row once, as the response shows it
/// (a v3 page leaves out `createdAt`, or keeps only the `$select`ed ones).
public struct RowShape: Sendable, Hashable {
    /// The system properties each row carries.
    public let systemProperties: Set<SystemProperty>
    /// Whether that is all of them (then only `$select` leaves members out: the check per column is skipped).
    private let hasAll: Bool

    /// A shape of rows with `systemProperties`.
    ///
    /// - Parameter systemProperties: The system properties each row carries.
    public init(systemProperties: Set<SystemProperty>) {
        self.systemProperties = systemProperties
        hasAll = systemProperties.count == SystemProperty.allCases.count
    }

    /// Every system property: rows as they are stored.
    public static let stored = RowShape(systemProperties: Set(SystemProperty.allCases))

    /// Whether a row carries `column`: a system property when the shape has it, a user field when `select` (the
    /// resolved `$select`, nil for all) names it.
    func carries(_ column: String, select: Set<String>?) -> Bool {
        if hasAll, select == nil { return true }  // a page's rows as stored: the hot path
        if let system = SystemProperty(rawValue: column) { return systemProperties.contains(system) }
        return select?.contains(column) ?? true
    }
}
