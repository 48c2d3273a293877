public import Foundation
import Logging
import SyncCore
import SyncSQLite

/// A request the store's account does not allow: nothing was sent.
///
/// A store belongs to one account (see <doc:SeveralPeopleOneDevice>): the first sync with a token binds it to the
/// token's account, and every later request must be for that account, so that one person's rows and unsent edits
/// never reach another person's account.
public enum AccountError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The store holds the data of `store`; the request is for `request`, or for no one (no token: signed out).
    case otherAccount(store: String, request: String?)
    /// The token names no account: it is not a JWT with a `sub` claim, and
    /// ``SyncClient/Configuration/accountID`` is not set.
    case unknownAccount
    /// The store was erased (a sign-out, here or in another process) while this sync ran; what it fetched
    /// after that was dropped.
    case erased

    /// One line naming the accounts and what to do; never a token.
    public var description: String {
        switch self {
        case .otherAccount(let store, let request?):
            "This store holds the data of account '\(store)', not of '\(request)': nothing was sent. "
                + "Sign out of '\(store)' first (signOut() sends its changes, then erases its data), "
                + "or open a store of the account '\(request)' (SQLiteLocalStore(named:account:))"
        case .otherAccount(let store, nil):
            "This store holds the data of account '\(store)' and no one is signed in: nothing was sent. "
                + "Sign in as '\(store)', or sign out (signOut(pending: .discard)) to erase its data"
        case .unknownAccount:
            "The token names no account (it is not a JWT with a 'sub' claim): nothing was sent. "
                + "Set Configuration.accountID to the signed-in user's id"
        case .erased:
            "The store was erased by a sign-out while this sync ran: nothing it fetched was kept"
        }
    }
}

extension AccountError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

/// What a sign-out does with changes not yet sent (``SyncClient/signOut(pending:)``).
public enum SignOutPending: Sendable, Hashable {
    /// Push them with the still valid token first; when any cannot be pushed, erase nothing.
    case pushFirst
    /// Erase them unsent (the app has asked the person).
    case discard
}

/// A sign-out that pushes first found changes it could not send: nothing was erased.
public struct SignOutError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Changes still queued (refused or in conflict, or written while the sign-out ran).
    public var pendingCount: Int
    /// Of those, the ones the server refused or that conflict, waiting for a resolution.
    public var errorCount: Int

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - pendingCount: Changes still queued.
    ///   - errorCount: Of those, the refused ones.
    public init(pendingCount: Int, errorCount: Int) {
        self.pendingCount = pendingCount
        self.errorCount = errorCount
    }

    /// One line saying what to do.
    public var description: String {
        "\(pendingCount) change(s) could not be sent (\(errorCount) refused or in conflict): nothing was erased. "
            + "Resolve them and sign out again, or sign out with .discard to drop them"
    }
}

extension SignOutError: LocalizedError {
    /// The same one line as ``description``.
    public var errorDescription: String? { description }
}

extension SyncClient {
    /// The account whose data the store holds: bound by the first request sent with a token (or with
    /// ``Configuration/accountID``), and cleared by ``signOut(pending:)``.
    ///
    /// - Returns: The account's id (a token's `sub`), or nil while the store belongs to no one.
    /// - Throws: ``LocalStoreError`` when the store cannot be read.
    public func account() async throws -> String? {
        try await store.read { try $0.setting(AccountGuard.key) }
    }

    /// Checks, with nothing sent, that the current user may use this store: asks the token provider for its
    /// token (not a refreshed one) and compares its account with the store's. An app calls it when it opens a
    /// store for a signed-in user, before showing any row; the SDK checks every request itself.
    ///
    /// - Returns: The account of the token (or ``Configuration/accountID``); nil with no token.
    /// - Throws: ``AccountError`` when the store holds another account's data (or someone's, with no token), or
    ///   when the token names no account; what the token provider throws; ``LocalStoreError``. It changes
    ///   nothing, so cancelling it (which reaches the token provider) leaves everything as it was.
    @discardableResult
    public func checkAccount() async throws -> String? {
        let token = try await configuration.tokenProvider?(false)
        return try await credentials.account.check(token: token, binding: false)
    }

    /// Signs the store's account out of this device: stops the automatic sync, then — after pushing what is
    /// queued, with ``SignOutPending/pushFirst`` — erases every byte of the account's data: rows, queue, refused
    /// operations, cursors, settings and the installation id, with the database file rebuilt and its `-wal`
    /// emptied. The table observers of this client then finish (without an error). The store is left empty and
    /// bound to no one; the next sync binds it to its token's account.
    ///
    /// For example, on a shared iPad:
    /// ```swift
    /// do {
    ///     try await client.signOut()                   // push first, then erase
    /// } catch {
    ///     // Nothing erased: ask whether to drop the unsent changes.
    ///     if await confirmDiscard(error) { try await client.signOut(pending: .discard) }
    /// }
    /// ```
    /// - Parameter pending: ``SignOutPending/pushFirst`` (the default) or ``SignOutPending/discard``.
    /// - Throws: With `.pushFirst`, what the push throws (``PushError``, ``AccountError``) or ``SignOutError`` when
    ///   changes stay unsent: then nothing is erased. ``LocalStoreError`` when the store cannot be erased (a
    ///   later sign-out finishes it). Cancellation while pushing, or while another client holds the push lock,
    ///   stops the sign-out with nothing erased; the erase itself, once begun, completes.
    public func signOut(pending: SignOutPending = .pushFirst) async throws {
        await stopSyncing()
        if pending == .pushFirst { try await push() }
        let store = self.store
        try await store.withPushLock {
            // In a task of its own, which the caller's cancellation does not reach: an erase that began ends (an
            // interrupted VACUUM would leave the deleted pages in the files).
            try await Task {
                try await store.erase { reader in
                    guard pending == .pushFirst else { return }
                    let left = try reader.operationCount(in: nil)
                    if left > 0 {
                        throw SignOutError(pendingCount: left, errorCount: try reader.operationErrors().count)
                    }
                }
            }.value
        }
        credentials.installationID.forget()
        credentials.account.beginSync()  // the next request reads the store, now no one's, and binds it
        observers.finishAll()
        configuration.logger.info("Signed out: the store was erased")
    }

    /// The account of a token: its `sub` claim when it is a JWT (read, not verified: the server verifies it).
    /// An app that keeps one store per account uses it to open the store of the user who signs in
    /// (``SQLiteLocalStore/init(named:account:)``).
    ///
    /// - Parameter token: The token, as the token provider returns it.
    /// - Returns: The `sub` claim, or nil when the token is not a JWT or has no `sub` string.
    public static func accountID(ofToken token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }  // a JWS; an encrypted JWT (5 parts) cannot be read here
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let claims = try? JSONValue(parsing: data),
            let subject = claims["sub"]?.stringValue, !subject.isEmpty
        else { return nil }
        return subject
    }
}

/// Finishes a client's table observations when its account signs out.
final class ObserverRegistry: Sendable {
    private let finishers = Locked<[UUID: @Sendable () -> Void]>([:])

    /// Registers `finish`; the returned id unregisters it.
    func add(_ finish: @escaping @Sendable () -> Void) -> UUID {
        let id = UUID()
        finishers.withLock { $0[id] = finish }
        return id
    }

    func remove(_ id: UUID) { finishers.withLock { _ = $0.removeValue(forKey: id) } }

    /// Finishes every registered observation.
    func finishAll() {
        for finish in finishers.withLock({ state in
            defer { state = [:] }; return state.values
        }) { finish() }
    }
}
