import ArgumentParser
import Foundation
import OfflineSync

extension TodoApp {
    /// Push; refused changes are not an error here (``waitingLine()`` reports them), an unreachable
    /// server or refused credentials are.
    func pushAll() async throws -> PushResult {
        do {
            return try await client.push()
        } catch let error as PushError {
            switch error {
            case .operationsFailed(let result): return result
            case .serverUnavailable(let reason, _): throw try await unavailable(reason)
            case .unauthorized: throw try await unauthorized()
            case .cancelled: throw TodoError("Cancelled")
            }
        }
    }

    /// Incremental pull of every item — and first, on a server with shared lists, of the lists and their members,
    /// together, so that no list shows without its owner — with a progress line on a terminal for long pulls. The
    /// summary adds up the tables'; `listsStillChanging` is true when the lists and members changed on the server
    /// through every pass of their pull, which then applied nothing of them (the next sync tries again).
    func pullAll() async throws -> (summary: PullSummary, listsStillChanging: Bool) {
        do {
            var shared: [PullSummary] = []
            var listsStillChanging = false
            do {
                let joint = try await client.pullTogether([
                    try members.pulling(queryID: "allListMembers"), try lists.pulling(queryID: "allTodoLists"),
                ])
                shared = joint.tables.map(\.summary)
                listsStillChanging = !joint.isWhole
            } catch PullError.rejected(status: 404, _) {
                // A server without shared lists (the tutorial's): items only.
            }
            let showProgress = Output.isTerminal
            let summary = try await items.pull(queryID: Self.queryID) { progress in
                guard showProgress, let total = progress.totalCount, total > 1000 else { return }
                FileHandle.standardError.write(Data("\rPulling… \(progress.appliedCount) of \(total)".utf8))
            }
            if showProgress, summary.appliedCount > 1000 { FileHandle.standardError.write(Data("\n".utf8)) }
            var all = summary
            all.appliedCount += shared.map(\.appliedCount).reduce(0, +)
            all.removedCount += shared.map(\.removedCount).reduce(0, +)
            all.reconciliations += shared.map(\.reconciliations).reduce(0, +)
            all.reconciledCount += shared.map(\.reconciledCount).reduce(0, +)
            return (all, listsStillChanging)
        } catch let error as PullError {
            switch error {
            case .serverUnavailable(let reason): throw try await unavailable(reason)
            case .unauthorized: throw try await unauthorized()
            default: throw TodoError("\(error)")
            }
        }
    }

    /// Fails with one line when changes wait for the user (conflicts or refusals), else does nothing.
    func failIfChangesWait() async throws {
        let errors = try await client.operationErrors()
        guard !errors.isEmpty else { return }
        let conflicts = errors.filter(\.isConflict).count
        let refused = errors.count - conflicts
        let parts = [
            conflicts > 0 ? "\(conflicts) conflict\(conflicts == 1 ? "" : "s")" : nil,
            refused > 0 ? "\(refused) refused change\(refused == 1 ? "" : "s")" : nil,
        ].compactMap { $0 }
        throw TodoError("\(parts.joined(separator: " and ")) waiting: see `todo conflicts`")
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send local changes, then fetch the server's (the tutorial's refresh).",
        discussion:
            "Exits 1 when conflicts or refused changes wait (see `todo conflicts`), 2 when the server is unreachable.")
    @OptionGroup var options: GlobalOptions
    func run() async throws {
        try await perform(options) { app in
            let sent = try await app.pushAll()
            let (summary, listsStillChanging) = try await app.pullAll()
            print(
                "Synced with \(app.serverURL): sent \(sent.pushedCount) change(s)\(Self.merges(sent))\(Self.sets(sent)), "
                    + "received \(summary.appliedCount) item(s).")
            if summary.removedCount > 0 {
                print("Removed \(summary.removedCount) row(s) of lists no longer shared with you.")
            }
            if summary.reconciliations > 0 {
                print(
                    "Away longer than the server keeps deletes: checked this device's rows with the server "
                        + "(\(summary.reconciliations) listing(s)), removed \(summary.reconciledCount) deleted "
                        + "meanwhile.")
            }
            if listsStillChanging { print(Self.listsStillChanging) }
            try await app.failIfChangesWait()
        }
    }

    /// Said when the lists and members kept changing through their whole pull, which then applied none of them.
    static let listsStillChanging = "Lists and members kept changing on the server: not updated this time; sync again."

    /// ", N change set(s) applied whole" and ", M change set(s) refused whole" (a new list and its owner, `todo lists
    /// new`; several items marked at once, `todo complete A B`) when the push sent sets; nothing otherwise.
    static func sets(_ result: PushResult) -> String {
        (result.changeSetsPushed > 0 ? ", \(result.changeSetsPushed) change set(s) applied whole" : "")
            + (result.changeSetsRefused > 0 ? ", \(result.changeSetsRefused) change set(s) refused whole" : "")
    }

    /// ", N merged with other devices' edits" when a push merged changes by themselves; nothing otherwise.
    static func merges(_ result: PushResult) -> String {
        result.mergedCount > 0 ? ", \(result.mergedCount) merged with other devices' edits" : ""
    }
}

struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send local changes.")
    @OptionGroup var options: GlobalOptions
    func run() async throws {
        try await perform(options) { app in
            let sent = try await app.pushAll()
            print("Sent \(sent.pushedCount) change(s)\(Sync.merges(sent)).")
            try await app.failIfChangesWait()
        }
    }
}

struct Pull: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch the server's changes (local changes are sent first).")
    @OptionGroup var options: GlobalOptions
    func run() async throws {
        try await perform(options) { app in
            let (summary, listsStillChanging) = try await app.pullAll()
            print("Received \(summary.appliedCount) item(s).")
            if listsStillChanging { print(Sync.listsStillChanging) }
            try await app.failIfChangesWait()
        }
    }
}

struct Pending: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the changes waiting to be sent.")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        try await perform(options) { app in
            let operations = try await app.client.pendingOperations()
            if json {
                return Output.json(
                    .array(
                        operations.map { operation in
                            [
                                "sequence": .int(operation.id), "kind": .string(operation.kind.rawValue),
                                "id": .string(operation.itemID.rawValue),
                            ]
                        }))
            }
            if operations.isEmpty { return print("Nothing to send.") }
            for operation in operations {
                let text =
                    try await app.items.item(id: operation.itemID)?.text ?? operation.item?["text"]?.stringValue ?? ""
                print(
                    "#\(operation.id)  \(operation.kind.rawValue.padding(toLength: 6, withPad: " ", startingAt: 0))  \(TodoApp.short(operation.itemID.rawValue))  \(text)"
                )
            }
        }
    }
}

struct Conflicts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show changes the server refused or that conflict, with both versions and the choices.")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        try await perform(options) { app in
            let errors = try await app.client.operationErrors()
            if json {
                return Output.json(
                    .array(
                        errors.map { error in
                            [
                                "id": .string(error.operation.itemID.rawValue),
                                "operation": .string(error.operation.kind.rawValue),
                                "status": .int(Int64(error.status)), "reason": .string(Self.reason(error)),
                                "message": error.message.map(JSONValue.string) ?? .null,
                                "choices": .array(Self.choices(error).map { .string($0.flag) }),
                                "mine": error.sentItem ?? .null, "server": error.serverItem ?? .null,
                                "base": error.baseItem ?? .null,
                                "fields": .array(error.conflictingFields.map(JSONValue.string)),
                            ]
                        }))
            }
            if errors.isEmpty { return print("No conflicts.") }
            for error in errors {
                let id = TodoApp.short(error.operation.itemID.rawValue)
                print("\(id)  \(error): \(Self.reason(error))")
                if !error.isConflict, let message = error.message { print("    server said: \(message)") }
                if !error.conflictingFields.isEmpty {
                    print("    both changed: \(error.conflictingFields.joined(separator: ", "))")
                    print("    before: \(Self.describe(error.baseItem))")
                }
                print("    mine:   \(Self.describe(error.sentItem))")
                print("    server: \(Self.describe(error.serverItem, known: error.isConflict))")
                for choice in Self.choices(error) { print("    todo resolve \(id) \(choice.flag)   \(choice.meaning)") }
            }
        }
    }

    /// Why the change waits, in the user's words.
    static func reason(_ error: OperationError) -> String {
        guard error.isConflict else { return "the server refused this change" }
        let server = error.serverItem
        if error.operation.kind == .delete { return "someone changed the item you deleted" }
        if server == nil || server?.isDeleted == true { return "someone deleted the item you changed" }
        if error.operation.kind == .insert { return "the server already has an item with this id" }
        if !error.conflictingFields.isEmpty { return "you and someone else changed the same thing" }
        return "someone changed the item since you last synced"
    }

    /// The resolutions that make sense for this error.
    static func choices(_ error: OperationError) -> [(flag: String, meaning: String)] {
        guard error.isConflict else {
            return [
                ("--discard", "drop my change and take the server's version"),
                ("--keep-mine", "send my change again as it is"),
            ]
        }
        let server = error.serverItem
        if error.operation.kind == .delete {
            return [("--keep-mine", "delete it anyway"), ("--take-server", "keep the server's version")]
        }
        if server == nil || server?.isDeleted == true {
            return [("--keep-mine", "bring it back with my version"), ("--take-server", "let it go")]
        }
        return [("--keep-mine", "send mine over the server's"), ("--take-server", "take the server's version")]
    }

    static func describe(_ item: JSONValue?, known: Bool = true) -> String {
        guard let item else { return known ? "(nothing)" : "(not known)" }
        if item.isDeleted { return "(deleted)" }
        return "[\(item["complete"]?.boolValue == true ? "✓" : " ")] \(item["text"]?.stringValue ?? "")"
    }
}

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Settle a conflict.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The item's id, or any unique prefix of it.") var id: String
    @Flag(help: "Keep my version: it is sent again over the server's on the next sync.") var keepMine = false
    @Flag(help: "Take the server's version and drop mine.") var takeServer = false
    @Flag(help: "Drop my change; the item becomes the server's version (or goes, if it has none).")
    var discard = false

    func validate() throws {
        guard [keepMine, takeServer, discard].filter({ $0 }).count == 1 else {
            throw ValidationError("Choose one of --keep-mine, --take-server, --discard")
        }
    }

    func run() async throws {
        try await perform(options) { app in
            let matches = try await app.client.operationErrors().filter {
                $0.operation.itemID.rawValue.lowercased().hasPrefix(id.lowercased())
            }
            guard matches.count == 1, let error = matches.first else {
                throw TodoError(
                    matches.isEmpty
                        ? "No conflict for an id starting with '\(id)'" : "'\(id)' matches several conflicts")
            }
            let resolution: ConflictResolution = keepMine ? .keepMine(nil) : takeServer ? .takeServerItem : .discard
            try await app.client.resolve(error, with: resolution)
            let verb =
                keepMine
                ? "Kept your version of" : takeServer ? "Took the server's version of" : "Discarded your change to"
            print(
                "\(verb) \(TodoApp.short(error.operation.itemID.rawValue)).\(keepMine ? " It is sent on the next sync." : "")"
            )
        }
    }
}

struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Clear the local list (the next sync fetches it again).")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Also drop local changes not yet sent.") var force = false
    func run() async throws {
        try await perform(options) { app in
            do {
                try await app.items.purge(mode: force ? .evenIfPending : .refuseIfPending)
            } catch let error as PurgeError {
                throw TodoError(
                    "\(error.pendingCount) change(s) not yet sent; run `todo sync` first, or `todo purge --force` to drop them"
                )
            }
            print("Cleared the local list.")
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the store, the server, the account, pending changes and the last sync.")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        try await perform(options) { app in
            let pending = try await app.client.pendingOperations().count
            let conflicts = try await app.client.operationErrors().count
            let files = try await app.client.pendingAttachments()
            let refused = files.filter { $0.refusal != nil }.count
            let lastSync = try await app.lastSync()
            let account = try await app.client.account()
            if json {
                return Output.json([
                    "store": .string(app.storePath), "url": .string(app.serverURL),
                    "account": account.map(JSONValue.string) ?? .null, "pending": .int(Int64(pending)),
                    "conflicts": .int(Int64(conflicts)), "lastSync": lastSync.map(JSONValue.string) ?? .null,
                    "filesWaiting": .int(Int64(files.count)),
                ])
            }
            print("Store:      \(app.storePath)")
            print("Server:     \(app.serverURL)")
            print("Account:    \(account ?? "none yet (the first sync with a token binds the store)")")
            print("Pending:    \(pending) change(s)")
            print("Conflicts:  \(conflicts)\(conflicts > 0 ? " (see `todo conflicts`)" : "")")
            if !files.isEmpty {
                let bytes = files.map(\.attachment.size).reduce(0, +)
                print(
                    "Files:      \(files.count) waiting to upload (\(bytes) bytes)\(refused > 0 ? ", \(refused) refused" : "")"
                )
            }
            print("Last sync:  \(lastSync ?? "never")")
        }
    }
}

struct Signout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send your changes, then erase every item of this store's account from the device.",
        discussion: """
            Needs the token of the account whose data the store holds, to send its changes first. When any change \
            cannot be sent (server unreachable, a conflict, another account's token) nothing is erased. \
            --discard erases without sending: changes not yet sent are lost.
            """)
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Erase without sending; changes not yet sent are lost.") var discard = false

    func run() async throws {
        try await perform(options, checkingAccount: false) { app in
            let account = try await app.client.account()
            do {
                try await app.client.signOut(pending: discard ? .discard : .pushFirst)
            } catch let error as PushError {
                switch error {
                case .operationsFailed(let result):
                    throw TodoError(
                        "\(result.errors.count) change(s) could not be sent (see `todo conflicts`): nothing was erased; "
                            + "resolve them, or `todo signout --discard` to drop them")
                case .serverUnavailable(let reason, _):
                    let message = try await app.unavailable(reason)
                    throw TodoError(message.description + "; nothing was erased", exitCode: message.exitCode)
                case .unauthorized: throw try await app.unauthorized()
                case .cancelled: throw TodoError("Cancelled; nothing was erased")
                }
            } catch let error as SignOutError {
                throw TodoError(
                    "\(error.pendingCount) change(s) could not be sent (see `todo conflicts`): nothing was erased; "
                        + "resolve them, or `todo signout --discard` to drop them")
            }
            print("Signed out\(account.map { " \($0)" } ?? ""): this device holds none of its items any more.")
        }
    }
}
