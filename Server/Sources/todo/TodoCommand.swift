import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncEncryption

/// `todo`: the offline to-do list of the tutorial, in a terminal.
@main
struct TodoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo",
        abstract: "An offline to-do list that syncs with sync-server.",
        discussion: """
            Every command but sync, push and pull works offline, on the local store alone.
            With no command in a terminal, todo starts an interactive prompt.
            """,
        subcommands: [
            Add.self, List.self, Complete.self, Reopen.self, Edit.self, Delete.self, Sync.self, Push.self, Pull.self,
            Pending.self, Conflicts.self, Resolve.self, Purge.self, Status.self, Watch.self, Signout.self, Lists.self,
            Share.self, Unshare.self, Attach.self, Open.self, ImportAMA.self, Rekey.self, Session.self,
        ])

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        guard isatty(STDIN_FILENO) != 0 else { throw CleanExit.helpRequest(self) }
        try await Interactive(options: options).run()
    }
}

/// Runs a command body, printing a ``TodoError`` as one line with its exit code. Given a token, the store must
/// hold its account's data (or no one's), unless `checkingAccount` is false (`signout`).
func perform(_ options: GlobalOptions, checkingAccount: Bool = true, _ body: (TodoApp) async throws -> Void)
    async throws
{
    do {
        let app = try await options.open()
        do {
            if checkingAccount, app.hasToken { try await app.client.checkAccount() }
            try await body(app)
        } catch let error as AccountError {
            throw TodoApp.otherAccount(error)
        }
    } catch let error as TodoError {
        FileHandle.standardError.write(Data("todo: \(error.description)\n".utf8))
        throw ExitCode(error.exitCode)
    } catch let error as LocalWriteError {
        FileHandle.standardError.write(Data("todo: \(error.description)\n".utf8))
        throw ExitCode(1)
    }
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add an item.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The shared list to add it to (its name or id): needed once you have lists.") var list: String?
    @Argument(help: "The item's text.") var text: [String]

    func run() async throws {
        let text = self.text.joined(separator: " ")
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("Give the item's text") }
        try await perform(options) { app in
            var listID: String?
            if let list {
                listID = try await app.list(matching: list).id
            } else if try await !app.lists.items().isEmpty {
                throw TodoError("Give the list to add it to: --list NAME (see `todo lists`)")
            }
            let item = try await app.items.insert(
                TodoItem(id: UUID().uuidString.lowercased(), text: text, complete: false, listId: listID))
            print("Added \(TodoApp.short(item.id))  \(item.text)")
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List open items (--all: completed ones too).")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Include completed items.") var all = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        try await perform(options) { app in
            var query = TableQuery<TodoItem>().orderBy(\.text)
            if !all { query = query.filter { $0.complete == false } }
            let items = try await app.items.items(matching: query)
            if json { return Output.json(.array(items.map(Output.itemJSON))) }
            if items.isEmpty { return print(all ? "No items." : "No open items.") }
            let names = Dictionary(
                try await app.lists.items().map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
            for item in items {
                let list = item.listId.map { "  [\(names[$0] ?? "a list no longer shared")]" } ?? ""
                let file = item.file == nil ? "" : "  [file]"
                print("\(TodoApp.short(item.id))  \(item.complete ? "✓" : " ")  \(item.text)\(list)\(file)")
            }
        }
    }
}

/// Changes one item found by id prefix.
func change(_ options: GlobalOptions, _ id: String, _ verb: String, _ edit: @escaping (inout TodoItem) -> Void)
    async throws
{
    try await change(options, [id], verb, edit)
}

/// Changes items found by id prefix: one alone, several as one change set (kept on the device and applied on the
/// server together, or not at all).
func change(_ options: GlobalOptions, _ ids: [String], _ verb: String, _ edit: @escaping (inout TodoItem) -> Void)
    async throws
{
    try await perform(options) { app in
        var items: [TodoItem] = []
        for id in ids {
            var item = try await app.item(matching: id)
            edit(&item)
            items.append(item)
        }
        guard Set(items.map(\.id)).count == items.count else { throw TodoError("An item is named twice") }
        if items.count == 1 {
            try await app.items.update(items[0])
        } else {
            let table = try app.items
            try await app.client.changeSet { [items] set in
                for item in items { try set.update(item, in: table) }
            }
        }
        for item in items { print("\(verb) \(TodoApp.short(item.id))  \(item.text)") }
    }
}

struct Complete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mark items done.", discussion: "Several items are marked as one change set: done together or not.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The items' ids, or unique prefixes of them.") var ids: [String]
    func run() async throws { try await change(options, ids, "Completed") { $0.complete = true } }
}

struct Reopen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mark items not done.",
        discussion: "Several items are marked as one change set: reopened together or not.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The items' ids, or unique prefixes of them.") var ids: [String]
    func run() async throws { try await change(options, ids, "Reopened") { $0.complete = false } }
}

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change an item's text.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The item's id, or any unique prefix of it.") var id: String
    @Argument(help: "The new text.") var text: [String]
    func run() async throws {
        let text = self.text.joined(separator: " ")
        guard !text.isEmpty else { throw ValidationError("Give the new text") }
        try await change(options, id, "Edited") { $0.text = text }
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete an item.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The item's id, or any unique prefix of it.") var id: String
    func run() async throws {
        try await perform(options) { app in
            let item = try await app.item(matching: id)
            try await app.items.delete(item)
            print("Deleted \(TodoApp.short(item.id))  \(item.text)")
        }
    }
}

struct Attach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Attach a file to an item (works offline; the next sync uploads it before the item's change).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The item's id, or any unique prefix of it.") var id: String
    @Argument(help: "The file.") var file: String

    func run() async throws {
        let path = (file as NSString).expandingTildeInPath
        guard FileManager.default.isReadableFile(atPath: path) else { throw ValidationError("Cannot read \(file)") }
        try await perform(options) { app in
            let item = try await app.item(matching: id)
            let attachment = try await app.items.attach(
                contentsOf: URL(fileURLWithPath: path), to: ItemID(item.id), field: "file")
            print(
                "Attached \((file as NSString).lastPathComponent) (\(attachment.size) bytes, sha256 \(attachment.hash.prefix(12))…) "
                    + "to \(TodoApp.short(item.id))  \(item.text)")
        }
    }
}

struct Open: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write out the file attached to an item (downloaded first when this device does not have it).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The item's id, or any unique prefix of it.") var id: String
    @Option(name: .shortAndLong, help: "Where to write it (default: the item's id in the current folder).")
    var output: String?

    func run() async throws {
        try await perform(options) { app in
            let item = try await app.item(matching: id)
            let target = URL(
                fileURLWithPath: (output.map { ($0 as NSString).expandingTildeInPath } ?? TodoApp.short(item.id)))
            let written: Bool
            do {
                // Written out plain (opened chunk by chunk when the store is encrypted).
                written = try await app.items.writeFile(for: ItemID(item.id), field: "file", to: target) { progress in
                    guard Output.isTerminal else { return }
                    FileHandle.standardError.write(
                        Data("\rDownloading: \(progress.completedBytes) of \(progress.totalBytes) bytes".utf8))
                }
            } catch let error as AttachmentError {
                throw TodoError(error.description)
            } catch let error as ServerUnavailableError {
                throw TodoError("\(error) — the file is not on this device yet; try again online", exitCode: 3)
            }
            guard written else { throw TodoError("\(TodoApp.short(item.id)) has no file: `todo attach ID FILE`") }
            if Output.isTerminal { FileHandle.standardError.write(Data("\r".utf8)) }
            let size = (try? FileManager.default.attributesOfItem(atPath: target.path)[.size] as? NSNumber)?.intValue
            print("Wrote \(target.path) (\(size ?? 0) bytes)")
        }
    }
}

/// `todo rekey`: changes the store's key, or encrypts a plain store, or makes an encrypted one plain — crash-safe
/// (docs/encryption.md): killed at any point, the store opens with the old key or the new one.
struct Rekey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change the store's key (--to FILE), encrypt a plain store (--key-file unset, --to FILE), or "
            + "decrypt it (--plain).")
    @OptionGroup var options: GlobalOptions
    @Option(help: "A file holding the new key (as --key-file).") var to: String?
    @Flag(help: "Make the store plain.") var plain = false

    func validate() throws {
        guard (to != nil) != plain else { throw ValidationError("Give either --to FILE or --plain") }
    }

    func run() async throws {
        do {
            let path = options.storePath
            let old = try options.storeKey()
            switch (old, try to.map { try GlobalOptions.readKey($0) }) {
            case (let old?, let new?):
                try SQLiteLocalStore.changeKey(path: path, from: old, to: new)
                print("The store has its new key: \(path)")
            case (nil, let new?):
                try SQLiteLocalStore.encryptInPlace(path: path, key: new)
                print("The store is encrypted: \(path)")
            case (let old?, nil):
                try SQLiteLocalStore.decryptInPlace(path: path, key: old)
                print("The store is plain: \(path)")
            case (nil, nil):
                throw TodoError("The store is plain already (no --key-file)")
            }
        } catch let error as StoreEncryptionError {
            FileHandle.standardError.write(Data("todo: \(error.description)\n".utf8))
            throw ExitCode(1)
        } catch let error as TodoError {
            FileHandle.standardError.write(Data("todo: \(error.description)\n".utf8))
            throw ExitCode(error.exitCode)
        }
    }
}
