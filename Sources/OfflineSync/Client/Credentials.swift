import Foundation
import SyncCore
import SyncSQLite

/// What every request of the store's account carries, and the rule that it is the store's account: the
/// installation id and the token, checked against the account whose data the store holds. The transport
/// (``TableEndpoint``) asks it for both and knows nothing of accounts.
struct Credentials: Sendable {
    let installationID: InstallationID
    let tokenProvider: TokenProvider?
    /// Checks that each request is for the account whose data the store holds.
    let account: AccountGuard

    init(store: SQLiteLocalStore, tokenProvider: TokenProvider?, accountID: String?) {
        installationID = InstallationID(store: store)
        self.tokenProvider = tokenProvider
        account = AccountGuard(store: store, configured: accountID)
    }

    /// Whether a 401 may be answered with a refreshed token.
    var refreshes: Bool { tokenProvider != nil }

    /// The token a request is sent with (a refreshed one with `refresh`), once the store's account allows it: a
    /// store that belongs to no one becomes the token's account's.
    ///
    /// - Throws: What the token provider throws; ``AccountError`` for another account's token; ``LocalStoreError``.
    func token(refresh: Bool) async throws -> String? {
        let token = try await tokenProvider?(refresh)
        try await account.check(token: token)
        return token
    }
}

/// Checks each request's account against the store's, binding a store that belongs to no one yet.
final class AccountGuard: Sendable {
    /// The setting that holds the store's account.
    static let key = "account"

    private let store: SQLiteLocalStore
    private let configured: String?
    /// The store's account as this client last checked it (outer nil: not checked yet); a pull's pages are
    /// kept only while the store still belongs to it.
    private let checked = Locked<String??>(nil)
    /// The account the store was read to belong to since the sync began (``beginSync()``; outer nil: not read yet):
    /// the sync's further requests for it send without reading the store again.
    private let verified = Locked<String??>(nil)

    init(store: SQLiteLocalStore, configured: String?) {
        self.store = store
        self.configured = configured
    }

    /// The account a request with `token` is for: ``SyncClient/Configuration/accountID`` when set, else the
    /// token's `sub`, else no one (no token).
    func account(of token: String?) throws -> String? {
        if let configured { return configured }
        guard let token else { return nil }
        guard let account = SyncClient.accountID(ofToken: token) else { throw AccountError.unknownAccount }
        return account
    }

    /// Starts a sync (a push, a pull): its first request reads the store's account again.
    ///
    /// Once per sync is enough for the same guarantee as a read before every request. What a sync sends comes from
    /// transactions that confirm the account (``confirm(in:)``: the push freezes each operation in one, before it is
    /// sent) and what it keeps is written in transactions that confirm it too (each page, each push outcome); a read
    /// before each request never closed the window between that read and the send, which those transactions do. A
    /// sign-out erases the store only between pushes, and a store erased or rebound by another client meanwhile is
    /// refused at the next confirmation (``AccountError``), not written to.
    func beginSync() {
        verified.withLock { $0 = nil }
    }

    /// Checks that a request with `token` may be sent from this store; with `binding`, a store that belongs to
    /// no one becomes the token's account's. Within a sync, the store is read for the first request only
    /// (``beginSync()``).
    ///
    /// - Returns: The request's account.
    /// - Throws: ``AccountError``; ``LocalStoreError``.
    @discardableResult
    func check(token: String?, binding: Bool = true) async throws -> String? {
        let account = try account(of: token)
        if binding, case .some(let known) = verified.withLock({ $0 }), known == account { return account }
        let bound = try await store.read { try $0.setting(Self.key) }
        if bound == account {
            if binding { remember(account) }
            return account
        }
        if let bound { throw AccountError.otherAccount(store: bound, request: account) }
        guard binding, let account else { return account }
        // Bind, unless another client bound it meanwhile.
        let now = try await store.write { writer in
            let current = try writer.setting(Self.key)
            if current == nil { try writer.setSetting(account, for: Self.key) }
            return current ?? account
        }
        guard now == account else { throw AccountError.otherAccount(store: now, request: account) }
        remember(account)
        return account
    }

    private func remember(_ account: String?) {
        checked.withLock { $0 = .some(account) }
        verified.withLock { $0 = .some(account) }
    }

    /// Throws unless the store still belongs to the account last checked (in a write transaction that keeps
    /// what a request fetched).
    func confirm(in reader: LocalStoreReader) throws {
        guard case .some(let account) = checked.withLock({ $0 }) else { return }
        let bound = try reader.setting(Self.key)
        guard bound != account else { return }
        if let bound { throw AccountError.otherAccount(store: bound, request: account) }
        throw AccountError.erased
    }
}

/// The installation id kept in the store, read (or created) once, on first use.
final class InstallationID: Sendable {
    private let store: SQLiteLocalStore
    private let cached = Locked<String?>(nil)

    init(store: SQLiteLocalStore) { self.store = store }

    func value() async throws -> String {
        if let id = cached.withLock({ $0 }) { return id }
        let id = try await store.write { writer in
            if let id = try writer.setting("installationID") { return id }
            let id = UUID().uuidString
            try writer.setSetting(id, for: "installationID")
            return id
        }
        cached.withLock { $0 = id }
        return id
    }

    /// Forgets the id read (the store was erased: the next request makes a new one).
    func forget() { cached.withLock { $0 = nil } }
}
