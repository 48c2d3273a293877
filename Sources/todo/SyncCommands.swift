import ArgumentParser
import Foundation
import OfflineSync

extension TodoApp {
    /// Push, mapping failures to one clear line.
    func pushAll() async throws -> Int {
        do {
            return try await client.push().pushedCount
        } catch let error as PushError {
            switch error {
            case .networkUnavailable: throw try await unreachable()
            case .operationsFailed(let result):
                let conflicts = result.errors.filter(\.isConflict).count
                throw TodoError(
                    "Sent \(result.pushedCount) change(s); \(result.errors.count) refused"
                        + (conflicts > 0 ? " (\(conflicts) conflict(s): see `todo conflicts`)" : ""))
            case .unauthorized: throw TodoError("The server refused the credentials")
            case .cancelled: throw TodoError("Cancelled")
            }
        }
    }

    /// Incremental pull of every item, with a progress line on a terminal for long pulls.
    func pullAll() async throws -> PullSummary {
        do {
            let showProgress = Output.isTerminal
            let summary = try await items.pull(queryID: Self.queryID) { progress in
                guard showProgress, let total = progress.totalCount, total > 1000 else { return }
                FileHandle.standardError.write(Data("\rPulling… \(progress.appliedCount) of \(total)".utf8))
            }
            if showProgress, summary.appliedCount > 1000 { FileHandle.standardError.write(Data("\n".utf8)) }
            try await recordSync()
            return summary
        } catch let error as PullError {
            switch error {
            case .networkUnavailable: throw try await unreachable()
            case .pushFailed(.networkUnavailable): throw try await unreachable()
            default: throw TodoError("\(error)")
            }
        }
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send local changes, then fetch the server's (the tutorial's refresh).")
    @OptionGroup var options: GlobalOptions
    func run() async throws {
        try await perform(options) { app in
            let sent = try await app.pushAll()
            let summary = try await app.pullAll()
            print("Synced with \(app.serverURL): sent \(sent) change(s), received \(summary.appliedCount) item(s).")
        }
    }
}

struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send local changes.")
    @OptionGroup var options: GlobalOptions
    func run() async throws {
        try await perform(options) { app in print("Sent \(try await app.pushAll()) change(s).") }
    }
}

struct Pull: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch the server's changes (local changes are sent first).")
    @OptionGroup var options: GlobalOptions
    func run() async throws {
        try await perform(options) { app in print("Received \(try await app.pullAll().appliedCount) item(s).") }
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
    static let configuration = CommandConfiguration(abstract: "Show changes the server refused, with both versions.")
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
                                "status": .int(Int64(error.status)), "mine": error.sentItem ?? .null,
                                "server": error.serverItem ?? .null,
                            ]
                        }))
            }
            if errors.isEmpty { return print("No conflicts.") }
            for error in errors {
                print("\(TodoApp.short(error.operation.itemID.rawValue))  \(error)")
                print("    mine:   \(Self.describe(error.sentItem))")
                print("    server: \(Self.describe(error.serverItem))")
            }
            print("Resolve with: todo resolve ID --keep-mine | --take-server | --discard")
        }
    }

    static func describe(_ item: JSONValue?) -> String {
        guard let item else { return "(nothing)" }
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
    @Flag(help: "Drop my change and the local item.") var discard = false

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
        abstract: "Show the store, the server, pending changes and the last sync.")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        try await perform(options) { app in
            let pending = try await app.client.pendingOperations().count
            let conflicts = try await app.client.operationErrors().filter(\.isConflict).count
            let lastSync = try await app.lastSync()
            if json {
                return Output.json([
                    "store": .string(app.storePath), "url": .string(app.serverURL), "pending": .int(Int64(pending)),
                    "conflicts": .int(Int64(conflicts)), "lastSync": lastSync.map(JSONValue.string) ?? .null,
                ])
            }
            print("Store:      \(app.storePath)")
            print("Server:     \(app.serverURL)")
            print("Pending:    \(pending) change(s)")
            print("Conflicts:  \(conflicts)")
            print("Last sync:  \(lastSync ?? "never")")
        }
    }
}
