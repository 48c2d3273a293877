import Foundation
import OfflineSync
import SyncCore
import SyncSQLite
import SyncServer
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A store belongs to one account (issue 29): the first request with a token binds it, a token for another
/// account sends nothing, and a sign-out pushes first (or not), then erases every byte of the account's data.
/// Against a real server that checks tokens, with a per-user `TodoItem`.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct AccountTests {
    static let secret = "account-test-secret-0123456789abcdef"

    /// Counts what reaches the network, and fails every request while `isDown`.
    struct Counting: HTTPTransport {
        let isDown = Locked(false)
        let sent = Locked<[String]>([])
        /// Runs before a request is sent (a test's interleaving).
        let before = Locked<(@Sendable (HTTPRequestData) async -> Void)?>(nil)
        let inner = URLSessionTransport()

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            if let before = before.withLock({ $0 }) { await before(request) }
            if isDown.withLock({ $0 }) { throw TransportError(.unreachable, host: request.url.host ?? "") }
            sent.withLock { $0.append("\(request.method) \(request.url.path)") }
            return try await inner.send(request)
        }

        var count: Int { sent.withLock { $0.count } }
    }

    /// A live server with tokens and a per-user `TodoItem`, and a token per user.
    struct Server: Sendable {
        let url: URL
        let workspace: Workspace

        func token(_ user: String) async throws -> String {
            try await makeHS256Token(subject: user, secret: AccountTests.secret)
        }

        /// A client of `user` (or anonymous) on the store file `store`.
        func client(
            _ user: String?, store: String = "device.sqlite", transport: Counting = Counting(),
            configure: (inout SyncClient.Configuration) -> Void = { _ in }
        ) async throws -> SyncClient {
            var token: String?
            if let user { token = try await self.token(user) }
            return try await SyncClient.make(url, workspace: workspace, store: store) {
                $0.transport = transport
                $0.retryLimit = 0
                if let token = token { $0.tokenProvider = { _ in token } }
                configure(&$0)
            }
        }

        /// The texts of the server's rows that `user` sees.
        func texts(of user: String) async throws -> Set<String> {
            var request = URLRequest(url: url.appendingPathComponent("tables/TodoItem"))
            request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
            request.setValue(try await token(user), forHTTPHeaderField: "X-ZUMO-AUTH")
            let (data, _) = try await URLSession.shared.data(for: request)
            return Set(try JSONValue(parsing: data).arrayValue?.compactMap { $0["text"]?.stringValue } ?? [])
        }
    }

    static func withServer(_ body: @Sendable (Server) async throws -> Void) async throws {
        let workspace = try Workspace()
        var table = try TableConfiguration(name: "TodoItem")
        table.perUser = true
        try await LiveServer.run(in: workspace, tables: [table], auth: AuthConfiguration(hs256Secret: secret)) { url in
            try await body(Server(url: url, workspace: workspace))
        }
    }

    static func item(_ text: String) -> TodoItem {
        TodoItem(id: UUID().uuidString.lowercased(), text: text, complete: false)
    }

    @Test func theAccountOfATokenIsItsSubClaimReadNotVerified() async throws {
        let token = try await makeHS256Token(subject: "sid:ABC/+?é", secret: Self.secret)
        #expect(SyncClient.accountID(ofToken: token) == "sid:ABC/+?é")
        // base64url without padding, any signature.
        let payload = Data(#"{"sub":"x~y"}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        #expect(SyncClient.accountID(ofToken: "e30.\(payload).sig") == "x~y")
        for opaque in [
            "", "token", "a.b", "a.b.c.d.e", "e30.e30.x", "e30.\(Data(#"{"sub":7}"#.utf8).base64EncodedString()).x",
        ] {
            #expect(SyncClient.accountID(ofToken: opaque) == nil, "\(opaque)")
        }
    }

    @Test func theFirstSyncBindsTheStoreAndAnotherAccountsTokenSendsNothing() async throws {
        try await Self.withServer { server in
            let alice = try await server.client("alice")
            #expect(try await alice.account() == nil)
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            try await todos.insert(Self.item("alice's diary"))
            try await todos.pull()
            #expect(try await alice.account() == "alice")
            try await todos.insert(Self.item("alice offline"))

            let wire = Counting()
            let bob = try await server.client("bob", transport: wire)
            let expected = AccountError.otherAccount(store: "alice", request: "bob")
            await #expect(throws: expected) { try await bob.push() }
            await #expect(throws: expected) { try await bob.syncTable("TodoItem").pull() }
            await #expect(throws: expected) { try await bob.table("TodoItem", of: TodoItem.self).items() }
            await #expect(throws: expected) { try await bob.checkAccount() }
            #expect(wire.count == 0, "nothing sent: \(wire.sent.withLock { $0 })")
            #expect(try await bob.pendingOperations().count == 1, "alice's change waits for her")
            #expect(try await server.texts(of: "bob").isEmpty)
            #expect(try await server.texts(of: "alice") == ["alice's diary"])
            #expect(
                expected.localizedDescription.contains("'alice'") && expected.localizedDescription.contains("'bob'"))

            // No token at all (signed out in the app) is refused too.
            let anonymous = try await server.client(nil, transport: wire)
            await #expect(throws: AccountError.otherAccount(store: "alice", request: nil)) {
                try await anonymous.push()
            }
            #expect(wire.count == 0)
        }
    }

    @Test func aTokenRefreshedIntoAnotherAccountIsRefusedBeforeItIsSent() async throws {
        try await Self.withServer { server in
            let alice = try await server.client("alice")
            try await alice.syncTable("TodoItem", of: TodoItem.self).pull()
            let wire = Counting()
            let expired = try await makeHS256Token(
                subject: "alice", secret: Self.secret, now: Date().addingTimeInterval(-7200))
            let bob = try await server.token("bob")
            let client = try await server.client(nil, transport: wire) {
                $0.tokenProvider = { refresh in refresh ? bob : expired }
            }
            try await client.syncTable("TodoItem", of: TodoItem.self).insert(Self.item("alice's"))
            await #expect(throws: AccountError.otherAccount(store: "alice", request: "bob")) { try await client.push() }
            #expect(wire.count == 1, "the 401, then nothing with bob's token")
            #expect(try await client.pendingOperations().count == 1)
        }
    }

    @Test func aTokenThatNamesNoAccountNeedsTheConfiguredAccount() async throws {
        try await Self.withServer { server in
            let wire = Counting()
            let opaque = try await server.client(nil, transport: wire) { $0.tokenProvider = { _ in "opaque" } }
            await #expect(throws: AccountError.unknownAccount) { try await opaque.syncTable("TodoItem").pull() }
            #expect(wire.count == 0)
            // The app names the account: the store is bound to it (the server still checks the token itself).
            let token = try await server.token("alice")
            let named = try await server.client(nil, store: "named.sqlite") {
                $0.tokenProvider = { _ in token }
                $0.accountID = "alice@example.com"
            }
            try await named.syncTable("TodoItem").pull()
            #expect(try await named.account() == "alice@example.com")
        }
    }

    @Test func signingOutPushesFirstThenErasesEverything() async throws {
        try await Self.withServer { server in
            let alice = try await server.client("alice")
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            try await todos.insert(Self.item("synced"))
            try await todos.pull(queryID: "all")
            try await todos.insert(Self.item("unsent"))
            let installation = try await alice.installationID()

            try await alice.signOut()
            #expect(try await server.texts(of: "alice") == ["synced", "unsent"])
            #expect(try await todos.items().isEmpty)
            #expect(try await alice.pendingOperations().isEmpty)
            #expect(try await alice.account() == nil)
            #expect(try await todos.lastSyncDate() == nil)
            #expect(try await alice.installationID() != installation, "a new installation for the next person")

            // Bob on the same device: the store is his now, with none of alice's rows.
            let bob = try await server.client("bob")
            let his = try bob.syncTable("TodoItem", of: TodoItem.self)
            try await his.insert(Self.item("bob's"))
            try await his.pull(queryID: "all")
            #expect(try await his.items().map(\.text) == ["bob's"])
            #expect(try await bob.account() == "bob")
            #expect(try await server.texts(of: "bob") == ["bob's"])
        }
    }

    @Test func aSignOutWhosePushFailsHalfWayErasesNothingAndLosesNothing() async throws {
        try await Self.withServer { server in
            let wire = Counting()
            let alice = try await server.client("alice", transport: wire) { $0.batchPush = .never }
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            for text in ["one", "two", "three"] { try await todos.insert(Self.item(text)) }
            // The network goes after the first operation's request.
            wire.before.withLock {
                $0 = { _ in if wire.count == 1 { wire.isDown.withLock { $0 = true } } }
            }
            let error = await #expect(throws: PushError.self) { try await alice.signOut() }
            guard case .serverUnavailable(_, let result)? = error else {
                Issue.record("expected serverUnavailable, got \(String(describing: error))"); return
            }
            #expect(result.pushedCount == 1)
            #expect(try await server.texts(of: "alice") == ["one"])
            #expect(try await todos.items().count == 3, "nothing erased")
            #expect(try await alice.pendingOperations().count == 2, "nothing lost")
            #expect(try await alice.account() == "alice")

            wire.before.withLock { $0 = nil }
            wire.isDown.withLock { $0 = false }
            try await alice.signOut()
            #expect(try await server.texts(of: "alice") == ["one", "two", "three"])
            #expect(try await todos.items().isEmpty)
        }
    }

    @Test func aConflictStopsASignOutUntilDiscarded() async throws {
        try await Self.withServer { server in
            let alice = try await server.client("alice")
            let phone = try await server.client("alice", store: "phone.sqlite")
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            let milk = try await todos.insert(Self.item("milk"))
            try await todos.pull()
            let other = try phone.syncTable("TodoItem", of: TodoItem.self)
            try await other.pull()
            var edited = try #require(try await other.item(id: ItemID(milk.id)))
            edited.text = "oat milk"
            try await other.update(edited)
            try await phone.push()
            var mine = try #require(try await todos.item(id: ItemID(milk.id)))
            mine.text = "almond milk"
            try await todos.update(mine)

            let error = await #expect(throws: PushError.self) { try await alice.signOut() }
            guard case .operationsFailed? = error else {
                Issue.record("expected operationsFailed, got \(String(describing: error))"); return
            }
            #expect(try await todos.item(id: ItemID(milk.id))?.text == "almond milk", "nothing erased")
            // Parked, the conflict still stops a second sign-out (its push skips it).
            await #expect(throws: SignOutError(pendingCount: 1, errorCount: 1)) { try await alice.signOut() }

            try await alice.signOut(pending: .discard)
            #expect(try await todos.items().isEmpty)
            #expect(try await alice.operationErrors().isEmpty)
            #expect(try await server.texts(of: "alice") == ["oat milk"])
        }
    }

    @Test func discardingErasesWithoutSendingAndEndsObserversAndTheAutomaticSync() async throws {
        try await Self.withServer { server in
            let wire = Counting()
            wire.isDown.withLock { $0 = true }  // offline: nothing could be pushed anyway
            let alice = try await server.client("alice", transport: wire)
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            try await todos.insert(Self.item("secret"))
            var options = AutoSyncOptions()
            options.reachability = nil
            await alice.startSyncing(pulling: [todos.autoPull()], options: options)
            let first = AsyncStream.makeStream(of: Void.self)
            let observed = Task {
                var seen: [Int] = []
                for try await items in todos.observe() {
                    seen.append(items.count)
                    first.continuation.yield()
                }
                return seen
            }
            for await _ in first.stream { break }  // the observation runs
            try await alice.signOut(pending: .discard)
            let seen = try await observed.value  // ends, without an error
            #expect(seen.first == 1)
            #expect(try await todos.items().isEmpty)
            #expect(wire.count == 0)
        }
    }

    @Test func aPullPageThatArrivesAfterASignOutIsDropped() async throws {
        try await Self.withServer { server in
            let seed = try await server.client("alice", store: "seed.sqlite")
            let seeded = try seed.syncTable("TodoItem", of: TodoItem.self)
            try await seeded.insert(contentsOf: (0..<5).map { Self.item("row \($0)") })
            try await seed.push()

            let wire = Counting()
            let alice = try await server.client("alice", transport: wire)
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            try await todos.insert(Self.item("unsent"))
            try await alice.push()
            // Another client (an app extension, another process) signs out while the page is on its way.
            let other = try await server.client(nil)
            wire.before.withLock {
                $0 = { request in
                    guard request.method == "GET" else { return }
                    try? await other.signOut(pending: .discard)
                }
            }
            await #expect(throws: AccountError.erased) { try await todos.pull(queryID: "all") }
            #expect(try await todos.items().isEmpty)
            #expect(try await alice.account() == nil)
        }
    }

    /// Every file of the store's folder is searched for the account's strings after a sign-out: rows, the queue
    /// (a pending delete keeps the whole item), a parked refusal, cursors and settings. Before it, they are found
    /// (so the search can fail).
    @Test func anErasedStoreHoldsNoByteOfTheAccountsData() async throws {
        try await Self.withServer { server in
            let folder = server.workspace.url.appendingPathComponent("device")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // Retries: the suite runs beside heavy tests on small machines, and a slow reply must not fail it.
            let alice = try await server.client("alice", store: "device/store.sqlite") {
                $0.retryLimit = 3
                ($0.pullPageSize, $0.maxPullPageSize) = (50, 50)
            }
            let todos = try alice.syncTable("TodoItem", of: TodoItem.self)
            let marker = "ZEBRA-\(UUID().uuidString)"
            var items: [TodoItem] = []
            for index in 0..<120 {  // several pages, and a WAL well past its first frames
                items.append(
                    try await todos.insert(Self.item("\(marker) synced \(index) " + String(repeating: "x", count: 200)))
                )
            }
            try await todos.pull(queryID: "all")
            try await todos.delete(items[0])  // a pending delete holds the item
            try await todos.insert(Self.item("\(marker) pending"))
            let refused = try alice.syncTable("Nowhere", of: TodoItem.self)
            try await refused.insert(Self.item("\(marker) refused"))
            _ = try? await alice.push()  // the unknown table parks a 404 with the sent item
            #expect(try await alice.operationErrors().count == 1)

            let before = try Self.hits(of: [marker, "alice"], in: folder)
            #expect(!before.isEmpty, "the search finds the data before the sign-out")

            try await alice.signOut(pending: .discard)
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            let hits = try Self.hits(of: [marker, "alice"], in: folder)
            print(
                "Searched \(files.count) files for the account's strings: \(files.joined(separator: ", ")); hits: \(hits.count)"
            )
            #expect(hits.isEmpty, "\(hits)")
            #expect(files.contains("store.sqlite") && files.contains("store.sqlite.lock"))
        }
    }

    /// The files of `folder` that hold any of `strings` (as UTF-8 bytes).
    static func hits(of strings: [String], in folder: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().flatMap { name in
            let data = try Data(contentsOf: folder.appendingPathComponent(name))
            return strings.filter { data.range(of: Data($0.utf8)) != nil }.map { "\(name): \($0)" }
        }
    }

    @Test func aStorePerAccountIsNamedAndBoundForItsAccount() async throws {
        let name = "account-test-\(UUID().uuidString.prefix(8))"
        let alicePath = try SQLiteLocalStore.defaultPath(named: name, account: "sid:Alice_1")
        #expect(alicePath.hasSuffix("/\(name)@sid_3AAlice_5F1.sqlite"))
        let long = String(repeating: "é", count: 40)
        let longPath = try SQLiteLocalStore.defaultPath(named: name, account: long)
        let longer = try SQLiteLocalStore.defaultPath(named: name, account: long + "x")
        #expect(longPath != longer && (longPath as NSString).lastPathComponent.count < 120)
        #expect(throws: ValueError.self) { try SQLiteLocalStore.defaultPath(named: name, account: "") }
        defer {
            for path in [alicePath, alicePath + "-wal", alicePath + "-shm", alicePath + ".lock"] {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
        try await Self.withServer { server in
            let token = try await server.token("sid:Alice_1")
            let store = try SQLiteLocalStore(named: name, account: "sid:Alice_1")
            let client = SyncClient(
                url: server.url, store: store,
                configuration: {
                    var configuration = SyncClient.Configuration()
                    configuration.protocol = Wire.current.protocol
                    configuration.tokenProvider = { _ in token }
                    return configuration
                }())
            #expect(try await client.account() == "sid:Alice_1", "bound before the first sync")
            try await client.syncTable("TodoItem").pull()
            let bob = try await server.token("bob")
            let wrong = SyncClient(
                url: server.url, store: store,
                configuration: {
                    var configuration = SyncClient.Configuration()
                    configuration.tokenProvider = { _ in bob }
                    return configuration
                }())
            await #expect(throws: AccountError.otherAccount(store: "sid:Alice_1", request: "bob")) {
                try await wrong.syncTable("TodoItem").pull()
            }
        }
    }
}
