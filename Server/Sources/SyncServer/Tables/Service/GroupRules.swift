import Crypto
import Foundation
import HTTPTypes
import SyncCore
import SyncOData

/// Tables shared through a members table (``TableConfiguration/membershipScope``, ``TableConfiguration/members``):
/// the caller's scope for each operation, the checks of the group a write puts a row in, and the scope token a page
/// carries.
struct GroupRules: Sendable {
    let store: any TableStore
    /// The membership-scoped tables of each members table (by its canonical name), with their group columns: a
    /// group is free to claim only when none of their rows belongs to it (``GroupClaim``).
    var groupedTables: [String: [GroupClaim.GroupedTable]] = [:]

    /// The membership part of the caller's scope for `operation` on `schema`, if the table has one: every member reads
    /// a group's rows; owners and editors write them; a members table's rows are read by the group's members and by
    /// the member they name, written by the group's owners, and deleted by them or by that member (who leaves).
    func membership(_ operation: TableOperation, _ schema: TableSchema, _ call: TableCall) async throws
        -> MembershipCondition?
    {
        let configuration = schema.configuration
        guard configuration.membershipScope != nil || configuration.members != nil else { return nil }
        guard let user = call.caller?.subject else {
            throw APIError(
                .forbidden, "\(schema.name)'s rows belong to the members of their groups: sign in",
                reason: .forbidden)
        }
        if let members = configuration.members {
            return MembershipCondition(
                column: members.groupColumn, membersTable: schema.name, members: members,
                membersSoftDelete: configuration.softDelete, user: user,
                roles: operation == .read ? nil : [.owner], ownRows: operation == .read || operation == .delete)
        }
        let scope = configuration.membershipScope!
        let (membersTable, members, softDelete) = try await membersTable(scope.members)
        return MembershipCondition(
            column: scope.column, membersTable: membersTable, members: members, membersSoftDelete: softDelete,
            user: user, roles: operation == .read ? nil : MemberRole.writers)
    }

    /// The members table `name` as served: its name, columns and whether it keeps tombstones.
    private func membersTable(_ name: TableName) async throws -> (TableName, MembersTable, Bool) {
        guard let schema = try await store.schema(of: name), let members = schema.configuration.members else {
            throw APIError(.serviceUnavailable, "The members table '\(name)' is not served")
        }
        return (schema.name, members, schema.configuration.softDelete)
    }

    /// Checks the group a caller's write puts a row in, for a membership-scoped table or a members table, and returns
    /// the scope of the write: 400 when a row would have none (or, in a members table, no user or no known role). A
    /// row of a scoped table goes only to a group where the caller is an owner or editor: the scope returned names the
    /// group (``RowScope/writtenGroup``), and the store checks it in the write itself (403 otherwise; a change that
    /// names the row's own group is no move, and the row the store changes decides: 404 out of scope, 403 for a
    /// viewer). A member goes only to a group the caller owns, or to a free group as its first member: the caller, as
    /// owner (``GroupClaim``: no member row, a tombstone included, and no row of the group in the tables it scopes,
    /// checked by the store in the insert's transaction; 403 otherwise). A change that leaves the group column out
    /// keeps the row where it is.
    func checkGroup(_ fields: [String: JSONValue], id: ItemID, _ scope: RowScope, schema: TableSchema, inserting: Bool)
        async throws -> RowScope
    {
        guard let membership = scope.membership else { return scope }
        if let members = schema.configuration.members { try Self.checkMember(fields, members, inserting: inserting) }
        let column = membership.column
        let given =
            schema.configuration.membershipScope?.isByID == true ? JSONValue.string(id.rawValue) : fields[column]
        guard inserting || given != nil else { return scope }
        guard let group = given?.stringValue, !group.isEmpty else {
            throw APIError.badRequest("Invalid item: '\(column)' names the \(schema.name) row's group: a string")
        }
        guard schema.configuration.members != nil else {
            var scope = scope
            scope.writtenGroup = group
            return scope
        }
        if !inserting {
            // A change that names the member row's own group (a whole row sent back) is no move: the row decides, as
            // a change without the column — a 404 out of scope, a 403 for a member who is not an owner.
            let stored = try await writing(id, schema, scope) {
                guard let item = try await store.item(id, in: schema.name, scope: scope, includeDeleted: true) else {
                    throw APIError(.notFound, TableStoreError.notFound.description)
                }
                return item
            }
            if stored[column] == given { return scope }
        }
        let roles = try await roles(of: membership.user, in: group, membership)
        if roles.contains(.owner) { return scope }
        if inserting, roles.isEmpty, fields[membership.members.userColumn]?.stringValue == membership.user,
            fields[membership.members.roleColumn]?.stringValue == MemberRole.owner.rawValue
        {
            // Whether the group is free is the store's to decide, in the insert's transaction (issue 44: checked
            // here, before the insert, several callers became the first owner of one group at once).
            var scope = scope
            scope.claimedGroup = GroupClaim(
                group: group,
                tables: [.init(table: schema.name, column: membership.members.groupColumn)]
                    + (groupedTables[schema.name.canonical] ?? []))
            return scope
        }
        throw APIError(
            .forbidden,
            "Only an owner of group '\(group)' changes its members (the first member of a new group is its creator, as owner)",
            reason: .forbidden)
    }

    /// A member row names its user and a known role (400 otherwise): an insert always, a change when it sends them.
    private static func checkMember(_ fields: [String: JSONValue], _ members: MembersTable, inserting: Bool) throws {
        let role = fields[members.roleColumn]
        if inserting || role != nil {
            guard let name = role?.stringValue, MemberRole(rawValue: name) != nil else {
                throw APIError.badRequest(
                    "Invalid item: '\(members.roleColumn)' is one of "
                        + MemberRole.allCases.map(\.rawValue).joined(separator: ", "))
            }
        }
        if inserting || fields[members.userColumn] != nil {
            guard let user = fields[members.userColumn]?.stringValue, !user.isEmpty else {
                throw APIError.badRequest("Invalid item: '\(members.userColumn)' names the member: a string")
            }
        }
    }

    /// The roles `user` has in `group` (none when not a member).
    func roles(of user: String, in group: String, _ membership: MembershipCondition) async throws -> Set<MemberRole> {
        let rows = try await mappingStoreErrors {
            try await store.memberships(of: user, in: membership.membersTable, group: group, exitsOf: nil)
        }
        return Set(rows.compactMap { $0.role.flatMap(MemberRole.init(rawValue:)) })
    }

    /// The caller's scope token for a page of a claim- or membership-scoped table: a digest of the claim's value, or
    /// of the groups the caller is a member of, then `.` and a digest of the latest moves of rows out of those groups
    /// (``ScopeExits``) — taken before the page is read, so that a page is never of a wider scope than the token it
    /// carries says (a device that sees the token change looks again, docs/sharing.md). Nil for other tables.
    func scopeToken(_ scope: RowScope, schema: TableSchema) async throws -> String? {
        var parts: [String]
        var exits: [String] = []
        if let membership = scope.membership {
            // One query: the caller's groups, each with the latest move of a row out of it.
            let exitsOf = schema.configuration.groupColumn != nil ? schema.name : nil
            let rows = try await mappingStoreErrors {
                try await store.memberships(
                    of: membership.user, in: membership.membersTable, group: nil, exitsOf: exitsOf)
            }
            parts = ["groups"] + Set(rows.map(\.group)).sorted()
            exits = Set(rows.compactMap { row in row.exit.map { "\(row.group)=\($0)" } }).sorted()
        } else if !scope.stamped.isEmpty {
            parts = ["claim"] + scope.stamped.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.serialized())" }
        } else {
            return nil
        }
        func digest(_ parts: [String]) -> String {
            SHA256.hash(data: Data(parts.joined(separator: "\u{1F}").utf8)).prefix(12).map {
                String(format: "%02x", $0)
            }
            .joined()
        }
        return scope.membership == nil ? digest(parts) : digest(parts) + "." + digest(exits)
    }

    /// Runs a store write in a membership-scoped table or a members table, where a viewer's write (or a member's
    /// change of the members) misses the rows the store may change: then a 403 for a row the caller may read, the 404
    /// of a missing row otherwise.
    func writing<T>(_ id: ItemID, _ schema: TableSchema, _ scope: RowScope, _ body: () async throws -> T)
        async throws -> T
    {
        guard var reading = scope.membership, reading.roles != nil else { return try await body() }
        do {
            return try await body()
        } catch let error where error as? TableStoreError == .notFound || (error as? APIError)?.status == .notFound {
            reading.roles = nil
            reading.ownRows = schema.configuration.members != nil
            var readable = scope
            readable.membership = reading
            if try await store.item(id, in: schema.name, scope: readable, includeDeleted: true) != nil {
                throw APIError(
                    .forbidden,
                    schema.configuration.members != nil
                        ? "Only an owner of the group changes its members; a member may only leave"
                        : "Viewers read the group's rows; owners and editors write them",
                    reason: .forbidden)
            }
            throw error
        }
    }
}
