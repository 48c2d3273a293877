import ArgumentParser
import Foundation
import OfflineSync

/// Shared lists, on a server whose `TodoList` and `TodoItem` rows belong to lists shared through `ListMember`
/// (docs/sharing.md): each works offline, as the other commands; `todo sync` sends and fetches them.
extension TodoApp {
    /// The list named `name` (any case) or whose id starts with it; an error when none or several do.
    func list(matching name: String) async throws -> TodoList {
        let all = try await lists.items()
        let named = all.filter { $0.name.lowercased() == name.lowercased() }
        let matches = named.isEmpty ? all.filter { $0.id.lowercased().hasPrefix(name.lowercased()) } : named
        guard matches.count == 1 else {
            throw TodoError(
                matches.isEmpty
                    ? "No list named '\(name)' (see `todo lists`)"
                    : "'\(name)' names \(matches.count) lists; give its id")
        }
        return matches[0]
    }

    /// The signed-in user, who owns, shares and joins lists.
    func signedInUser() throws -> String {
        guard let user else { throw TodoError("Shared lists need a token (--token, $TODO_TOKEN or $TODO_TOKEN_FILE)") }
        return user
    }
}

struct Lists: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show your lists, with their members (`todo lists new NAME` makes one).",
        subcommands: [ShowLists.self, NewList.self], defaultSubcommand: ShowLists.self)
}

struct ShowLists: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show your lists.")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        try await perform(options) { app in
            let lists = try await app.lists.items(matching: TableQuery<TodoList>().orderBy(\.name))
            let members = try await app.members.items()
            func membersOf(_ list: TodoList) -> [ListMember] {
                members.filter { $0.listId == list.id }.sorted { $0.userId < $1.userId }
            }
            if json {
                return Output.json(
                    .array(
                        lists.map { list in
                            [
                                "id": .string(list.id), "name": .string(list.name),
                                "members": .object(
                                    Dictionary(
                                        membersOf(list).map { ($0.userId, JSONValue.string($0.role)) },
                                        uniquingKeysWith: { first, _ in first })),
                            ]
                        }))
            }
            if lists.isEmpty { return print("No lists.") }
            for list in lists {
                let who = membersOf(list).map { "\($0.userId) (\($0.role))" }.joined(separator: ", ")
                print("\(TodoApp.short(list.id))  \(list.name)  — \(who)")
            }
        }
    }
}

struct NewList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new", abstract: "Make a list, of which you are the owner.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The list's name.") var name: [String]

    func run() async throws {
        let name = self.name.joined(separator: " ")
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("Give the list's name") }
        try await perform(options) { app in
            let id = UUID().uuidString.lowercased()
            let owner = ListMember(
                id: UUID().uuidString.lowercased(), listId: id, userId: try app.signedInUser(), role: "owner")
            let (members, lists) = (try app.members, try app.lists)
            // One change set: no device sees the list without its owner or the owner without the list. Its first
            // member first: the server makes the creator of a group with no members its owner, and the list itself
            // may only be written by a member.
            try await app.client.changeSet { set in
                try set.insert(owner, into: members)
                try set.insert(TodoList(id: id, name: name), into: lists)
            }
            print("Made list \(TodoApp.short(id))  \(name)")
        }
    }
}

struct Share: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Share a list with a user (its owners may).",
        discussion: "Roles: editor (reads and changes the items; the default), viewer (reads), owner (also shares).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The list's name or id.") var list: String
    @Argument(help: "The user, as their token's sub.") var user: String
    @Option(help: "owner, editor or viewer.") var role = "editor"

    func validate() throws {
        guard ["owner", "editor", "viewer"].contains(role) else {
            throw ValidationError("--role is owner, editor or viewer")
        }
    }

    func run() async throws {
        try await perform(options) { app in
            let list = try await app.list(matching: self.list)
            let existing = try await app.members.items().filter { $0.listId == list.id && $0.userId == user }
            // Every row of theirs (two owners' devices may each have shared the list while offline): the server gives
            // a member of two rows the wider role, so one left as editor would keep them an editor.
            for var member in existing where member.role != role {
                member.role = role
                try await app.members.update(member)
            }
            if existing.isEmpty {
                try await app.members.insert(
                    ListMember(id: UUID().uuidString.lowercased(), listId: list.id, userId: user, role: role))
            }
            print("Shared \(list.name) with \(user) (\(role)).")
        }
    }
}

struct Unshare: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop sharing a list with a user (or, with your own name, leave it).",
        discussion: "Their devices drop the list and its items on their next sync.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The list's name or id.") var list: String
    @Argument(help: "The user, as their token's sub.") var user: String

    func run() async throws {
        try await perform(options) { app in
            let list = try await app.list(matching: self.list)
            let rows = try await app.members.items().filter { $0.listId == list.id && $0.userId == user }
            guard !rows.isEmpty else { throw TodoError("\(list.name) is not shared with \(user)") }
            for row in rows { try await app.members.delete(row) }
            print("Stopped sharing \(list.name) with \(user).")
        }
    }
}
