import Foundation
import OfflineSync
import SyncServer
import Testing

/// The SDK's `tokenProvider` against a real server that checks tokens (issue 15): a 401 asks the provider
/// once for a fresh token and goes on; a provider that has none left stops the sync with `unauthorized`, and
/// every change waits in the queue for the next sign-in.
@Suite(.onEveryWire, .timeLimit(.minutes(3))) struct TokenTests {
    static let secret = "client-test-secret-0123456789abcdef"

    /// What the provider was asked, and what it answers: an expired token first, then `fresh` on a refresh.
    final class Provider: @unchecked Sendable {  // @unchecked: state behind `lock`.
        private let lock = NSLock()
        private var asked: [Bool] = []
        private var fresh: String?
        let expired: String

        init(expired: String, fresh: String?) {
            self.expired = expired
            self.fresh = fresh
        }

        func token(_ refresh: Bool) -> String? {
            lock.withLock {
                asked.append(refresh)
                return refresh ? fresh ?? expired : expired
            }
        }

        var calls: [Bool] { lock.withLock { asked } }
        func signIn(_ token: String) { lock.withLock { fresh = token } }
    }

    static func expiredToken() async throws -> String {
        try await makeHS256Token(subject: "alice", secret: secret, now: Date().addingTimeInterval(-7200))
    }

    /// A client whose tokens come from `provider`, and its `TodoItem`, against a live server with auth and a
    /// per-user `TodoItem`.
    static func withClient(
        _ provider: Provider, _ body: @Sendable (SyncClient, SyncTable<TodoItem>) async throws -> Void
    ) async throws {
        let workspace = try Workspace()
        var table = try TableConfiguration(name: "TodoItem")
        table.perUser = true
        try await LiveServer.run(in: workspace, tables: [table], auth: AuthConfiguration(hs256Secret: secret)) { url in
            let client = try await SyncClient.make(url, workspace: workspace) {
                $0.tokenProvider = { provider.token($0) }
            }
            try await body(client, try client.syncTable("TodoItem", of: TodoItem.self))
        }
    }

    @Test func anExpiredTokenIsRefreshedOnceThenSyncGoesOn() async throws {
        let provider = Provider(
            expired: try await Self.expiredToken(),
            fresh: try await makeHS256Token(subject: "alice", secret: Self.secret))
        try await Self.withClient(provider) { client, table in
            try await table.insert(TodoItem(id: "a", text: "milk", complete: false))
            #expect(try await client.push().pushedCount == 1)
            // One 401, one refresh; the fresh token is then used for the retried request.
            #expect(provider.calls == [false, true])
        }
    }

    @Test func withoutAFreshTokenTheSyncStopsUnauthorizedAndKeepsEveryChange() async throws {
        let provider = Provider(expired: try await Self.expiredToken(), fresh: nil)
        try await Self.withClient(provider) { client, table in
            try await table.insert(TodoItem(id: "a", text: "milk", complete: false))
            try await table.insert(TodoItem(id: "b", text: "eggs", complete: false))
            let error = await #expect(throws: PushError.self) { try await client.push() }
            guard case .unauthorized(let result)? = error else {
                Issue.record("expected unauthorized, got \(String(describing: error))")
                return
            }
            #expect(result.pushedCount == 0)
            #expect(provider.calls == [false, true], "asked again once, not in a loop")
            let pull = await #expect(throws: PullError.self) { try await table.pull() }
            guard case .unauthorized? = pull else {
                Issue.record("expected unauthorized, got \(String(describing: pull))")
                return
            }
            #expect(try await client.pendingOperations().count == 2)

            provider.signIn(try await makeHS256Token(subject: "alice", secret: Self.secret))
            #expect(try await client.push().pushedCount == 2)
            #expect(try await client.pendingOperations().isEmpty)
        }
    }
}
