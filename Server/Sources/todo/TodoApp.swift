import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncEncryption

/// The tutorial's item; on a server with shared lists, the list it belongs to; on one that keeps files
/// (docs/attachments.md), the SHA-256 of the file attached to it.
struct TodoItem: Codable, Sendable {
    var id: String
    var text: String
    var complete: Bool
    var listId: String?
    var file: String?
    var version: String?
    var updatedAt: Date?
}

extension TodoItem {
    /// Reads a row another client wrote without some fields (a v3 replace that left out `complete`, a web page that
    /// sent `text: null`): a missing text is empty, a missing `complete` is false. One such row must not keep every
    /// member from reading the list (issue 44, item 10).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        text = try container.decodeIfPresent(String.self, forKey: .text) ?? ""
        complete = try container.decodeIfPresent(Bool.self, forKey: .complete) ?? false
        listId = try container.decodeIfPresent(String.self, forKey: .listId)
        file = try container.decodeIfPresent(String.self, forKey: .file)
        version = try container.decodeIfPresent(String.self, forKey: .version)
        updatedAt = try container.decodeIfPresent(Date.self, forKey: .updatedAt)
    }
}

/// A shared list (on a server whose `TodoList` rows are groups of a members table, docs/sharing.md).
struct TodoList: Codable, Sendable {
    var id: String
    var name: String

    init(id: String, name: String) {
        self.id = id
        self.name = name
    }

    /// Reads a list another client wrote without a name as unnamed, as ``TodoItem`` reads its rows.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? ""
    }
}

/// Who belongs to a list, with which role: owner, editor or viewer.
struct ListMember: Codable, Sendable {
    var id: String
    var listId: String
    var userId: String
    var role: String
}

/// Where the app keeps its data and which server it syncs with: options, else environment, else defaults.
struct GlobalOptions: ParsableArguments {
    @Option(help: "The local store file (default: $TODO_STORE, else ~/.todo/todo.sqlite).")
    var store: String?

    @Option(help: "The server (default: $TODO_URL, else http://127.0.0.1:8080).")
    var url: String?

    @Option(help: "The user's token for a server that checks them (default: $TODO_TOKEN).")
    var token: String?

    @Option(help: "A file holding the user's token, read again when the server refuses it (default: $TODO_TOKEN_FILE).")
    var tokenFile: String?

    @Option(
        name: .customLong("protocol"),
        help: "The server's protocol: v2 (Azure Mobile Apps) or v3 (Datasync) (default: $TODO_PROTOCOL, else v2).")
    var wireProtocol: String?

    @Option(
        help: ArgumentHelp(
            "A file holding the store's key: the store is encrypted (docs/encryption.md) (default: $TODO_KEY_FILE).",
            discussion: "64 hex digits are a raw key of 32 bytes (e.g. `openssl rand -hex 32`); any other text is a "
                + "passphrase, stretched by scrypt each time the store opens (about 0.1 s)."))
    var keyFile: String?

    var storePath: String {
        let path = store ?? ProcessInfo.processInfo.environment["TODO_STORE"] ?? "~/.todo/todo.sqlite"
        return (path as NSString).expandingTildeInPath
    }

    var serverURL: String {
        url ?? ProcessInfo.processInfo.environment["TODO_URL"] ?? "http://127.0.0.1:8080"
    }

    /// The one connection pool of the process: the commands of a `todo session` share it, as an app's clients would
    /// (a `URLSession` per command would keep its connections open until the process ends).
    static let transport = URLSessionTransport()

    /// Opens the store (creating its folder) and a client for the server.
    func open() async throws -> TodoApp {
        guard let server = URL(string: serverURL), server.scheme != nil, server.host != nil else {
            throw ValidationError("--url must be an http URL such as http://127.0.0.1:8080")
        }
        let folder = (storePath as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        var configuration = SyncClient.Configuration()
        let environment = ProcessInfo.processInfo.environment
        switch (wireProtocol ?? environment["TODO_PROTOCOL"] ?? "v2").lowercased() {
        case "v2", "2", "2.0.0": configuration.protocol = .v2
        case "v3", "3", "3.0.0": configuration.protocol = .v3
        case let other: throw ValidationError("--protocol must be v2 or v3, not '\(other)'")
        }
        configuration.transport = Self.transport
        configuration.requestTimeout = .seconds(10)
        configuration.retryLimit = 2
        // A list and its owner are one change set, applied whole by `sync-server` (v2). A server without atomic
        // batches (and the v3 dialect) gets them one by one — another device may see one before the other for a
        // moment — rather than never.
        configuration.changeSetsWithoutAtomicServer = .sendSeparately
        // Small pages make a short list take several pages (the chaos test uses them to fault multi-page pulls).
        if let size = environment["TODO_PULL_PAGE_SIZE"].flatMap({ Int($0) }), size > 0 {
            configuration.pullPageSize = size
            configuration.maxPullPageSize = environment["TODO_MAX_PULL_PAGE_SIZE"].flatMap { Int($0) } ?? size
        }
        let tokenFile = (tokenFile ?? environment["TODO_TOKEN_FILE"]).map { ($0 as NSString).expandingTildeInPath }
        let token = token ?? environment["TODO_TOKEN"]
        if let tokenFile {
            // Read on every request, so that a token refreshed by a sign-in elsewhere is used at once.
            configuration.tokenProvider = { _ in try Self.readToken(tokenFile) }
        } else if let token {
            configuration.tokenProvider = { _ in token }
        }
        let store = try openStore()
        let client = SyncClient(url: server, store: store, configuration: configuration)
        let user = (tokenFile.flatMap { try? Self.readToken($0) } ?? token).flatMap {
            SyncClient.accountID(ofToken: $0)
        }
        return TodoApp(
            client: client, store: store, storePath: storePath, serverURL: serverURL,
            hasToken: token != nil || tokenFile != nil,
            user: user,
            signIn: tokenFile.map { "put a new token in \($0)" } ?? "pass a new token with --token or $TODO_TOKEN")
    }

    /// The key in `--key-file` (or `$TODO_KEY_FILE`), or nil when none is named (a plain store).
    func storeKey() throws -> StoreKey? {
        guard let keyFile = keyFile ?? ProcessInfo.processInfo.environment["TODO_KEY_FILE"], !keyFile.isEmpty else {
            return nil
        }
        return try Self.readKey(keyFile)
    }

    /// The key a key file holds: 64 hex digits are a raw key, any other text a passphrase.
    static func readKey(_ file: String) throws -> StoreKey {
        let path = (file as NSString).expandingTildeInPath
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TodoError("Cannot read the key file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return try hexBytes(text).map { try StoreKey.raw($0) } ?? StoreKey.passphrase(text)
    }

    /// The store: encrypted with the key in `--key-file` (or `$TODO_KEY_FILE`) when one is named, else plain.
    func openStore() throws -> SQLiteLocalStore {
        guard let key = try storeKey() else { return try SQLiteLocalStore(path: storePath) }
        do {
            return try SQLiteLocalStore.encrypted(path: storePath, key: key)
        } catch let error as StoreEncryptionError {
            throw TodoError("Cannot open the store: \(error)")
        }
    }

    /// The 32 bytes that 64 hex digits spell, else nil.
    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }

    /// The token in a file, without surrounding white space.
    static func readToken(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TodoError("Cannot read the token file \(path)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The app's work on top of the public OfflineSync API.
struct TodoApp {
    let client: SyncClient
    /// The client's store (plain or encrypted).
    let store: SQLiteLocalStore
    let storePath: String
    let serverURL: String
    /// Whether a token was given (then every command checks it is for the store's account).
    let hasToken: Bool
    /// The user the token names (its `sub`), if any.
    let user: String?
    /// How the user gives a new token, for the "sign in again" message.
    let signIn: String
    static let queryID: QueryID = "allTodoItems"

    var items: SyncTable<TodoItem> {
        get throws {
            try client.syncTable("TodoItem", of: TodoItem.self, attachments: AttachmentPolicy(fields: ["file"]))
        }
    }

    var lists: SyncTable<TodoList> {
        get throws { try client.syncTable("TodoList", of: TodoList.self) }
    }

    var members: SyncTable<ListMember> {
        get throws { try client.syncTable("ListMember", of: ListMember.self) }
    }

    /// The item whose id starts with `prefix` (any case); an error when none or several do.
    func item(matching prefix: String) async throws -> TodoItem {
        let lowered = prefix.lowercased()
        let matches = try await items.items().filter { $0.id.lowercased().hasPrefix(lowered) }
        guard !matches.isEmpty else { throw TodoError("No item with an id starting with '\(prefix)'") }
        guard matches.count == 1 else {
            throw TodoError(
                "'\(prefix)' matches \(matches.count) items (\(matches.map { Self.short($0.id) }.joined(separator: ", "))); give more of the id"
            )
        }
        return matches[0]
    }

    static func short(_ id: String) -> String { String(id.prefix(8)) }

    /// When the list was last synced, as a wire date, or nil.
    func lastSync() async throws -> String? {
        try await items.lastSyncDate().map { WireDate($0).description }
    }

    /// The one-line message for a server that cannot be reached or cannot work now; nothing is lost.
    /// The server refused the token, even after asking for it again: nothing is lost, the user signs in again.
    func unauthorized() async throws -> TodoError {
        let pending = try await client.pendingOperations().count
        return TodoError(
            "Sign in again: the server refused your token (expired or not valid) — \(signIn); your \(pending) "
                + "change\(pending == 1 ? " is" : "s are") kept and will be sent on the next sync", exitCode: 3)
    }

    /// The one line for a store that holds another account's data (exit status 4).
    static func otherAccount(_ error: AccountError) -> TodoError {
        switch error {
        case .otherAccount(let store, let request):
            TodoError(
                "this store holds the data of \(store)\(request.map { ", not of \($0)" } ?? ""): run `todo signout` "
                    + "with \(store)'s token to send their changes and erase it, or `todo signout --discard` to erase it "
                    + "unsent (or use --store for a store of your own)", exitCode: 4)
        case .unknownAccount:
            TodoError(
                "the token is not a JWT with a 'sub' claim, so whose data this store may hold cannot be told: nothing "
                    + "was sent; use a token from your sign-in (or `sync-server token`)", exitCode: 4)
        case .erased: TodoError(error.description, exitCode: 4)
        }
    }

    func unavailable(_ error: ServerUnavailableError) async throws -> TodoError {
        let pending = try await client.pendingOperations().count
        let what: String
        switch error.reason {
        case .noReply(let transport) where transport.code == .unreachable: what = "Server unreachable at \(serverURL)"
        default: what = "Server unavailable at \(serverURL) (\(error))"
        }
        return TodoError(
            "\(what) — your \(pending) change\(pending == 1 ? "" : "s") "
                + "\(pending == 1 ? "is" : "are") kept and will be sent on the next sync", exitCode: 2)
    }
}

/// A failure the user can act on: printed as one line, with an exit code (1: conflicts or a refusal, 2: server
/// unreachable, 3: token refused, 4: the store holds another account's data).
struct TodoError: Error, CustomStringConvertible {
    let description: String
    let exitCode: Int32

    init(_ description: String, exitCode: Int32 = 1) {
        self.description = description
        self.exitCode = exitCode
    }
}

/// Prints JSON for scripts.
enum Output {
    static func json(_ value: JSONValue) {
        print(value.serialized())
    }

    static func itemJSON(_ item: TodoItem) -> JSONValue {
        [
            "id": .string(item.id), "text": .string(item.text), "complete": .bool(item.complete),
            "updatedAt": item.updatedAt.map { .string(WireDate($0).description) } ?? .null,
            "version": item.version.map(JSONValue.string) ?? .null,
            "file": item.file.map(JSONValue.string) ?? .null,
        ]
    }

    static var isTerminal: Bool { isatty(STDOUT_FILENO) != 0 }
}
