import Foundation
import GRDB
import SyncCore
import SyncSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The default local store: one SQLite file (WAL mode) holding each sync table's rows as JSON, the
/// operation queue, operation errors, pull cursors and settings.
///
/// Rows keep the item exactly as JSON (integers stay integers) and local queries read fields with
/// `json_extract`, so any item shape is queryable without a declared schema. The store's own tables
/// are created by versioned migrations that never drop pending operations.
///
/// Several clients may open the same file at once — two `SyncClient`s in one process, or an app and
/// its extension in two processes: the queue is shared through SQLite transactions, and pushes take
/// turns through a lock file beside the store (`PATH.lock`), so no edit is lost and no operation is
/// sent twice at once.
///
/// The engine reads and writes it only in transactions (a reader or a writer valid for one call): every
/// local change runs in one `write(_:)`, so a crash leaves the row and the queue both changed or both unchanged.
///
/// For example:
/// ```swift
/// let store = try SQLiteLocalStore(named: "todo")     // in Application Support (Linux: ~/.local/share)
/// let client = SyncClient(url: serverURL, store: store)
/// ```
public final class SQLiteLocalStore: Sendable {
    let pool: DatabasePool
    /// Tables whose row table is known to exist (committed).
    let knownTables = Locked<Set<String>>([])
    /// The file whose lock serializes pushes across clients and processes.
    let lockPath: String
    /// The folder of the files attached to rows (`PATH.attachments`), made when the first one is attached or
    /// downloaded.
    let attachmentDirectory: URL
    /// An encrypted store's additions; nil: a plain store.
    let encryption: Encryption?
    /// The key of an encrypted store's attachment files (32 bytes); nil: they are plain.
    var attachmentKey: [UInt8]? { encryption?.attachmentKey }
    /// The store's database file.
    var databasePath: String { pool.path }

    /// Opens (or creates) the store file and migrates it.
    ///
    /// - Parameter path: The SQLite file; its folder must exist.
    /// - Throws: ``LocalStoreError`` when the file cannot be opened or migrated.
    public convenience init(path: String) throws {
        do {
            try StoreReplacement.finish(path)  // a change of encryption a crash interrupted
        } catch {
            throw LocalStoreError(operation: "open \(path)", underlying: error)
        }
        try self.init(path: path, encryption: nil)
    }

    /// What an encrypted store (`OfflineSyncEncryption`) adds to a plain one.
    package struct Encryption: Sendable {
        /// SQL run on each connection as it opens (its pragmas).
        package var connectionSQL: String
        /// The key that seals its attachment files (``SealedAttachment``).
        package var attachmentKey: [UInt8]
        /// The page that last failed to authenticate (taken: cleared), to say why a read or write failed.
        package var takeFailure: @Sendable () -> (any Error)?

        package init(
            connectionSQL: String, attachmentKey: [UInt8], takeFailure: @escaping @Sendable () -> (any Error)?
        ) {
            self.connectionSQL = connectionSQL
            self.attachmentKey = attachmentKey
            self.takeFailure = takeFailure
        }
    }

    /// ``init(path:)`` for an encrypted store.
    package init(path: String, encryption: Encryption?) throws {
        self.encryption = encryption
        lockPath = path + ".lock"
        attachmentDirectory = URL(fileURLWithPath: path + ".attachments")
        ImportWorkingCopies.removeStale(path)  // a copy of an old store that a killed import left
        do {
            pool = try openDatabasePool(path: path) { db in
                if let encryption { try db.execute(sql: encryption.connectionSQL) }
            }
            // A local write commits its row, its indexes and its queued operation (about 6 pages, against 2 for a
            // bare row), so SQLite's checkpoint every 1,000 pages came three times as often per write; each costs
            // two fsyncs. At 4,000 pages (a WAL of up to 16 MB): local.insert +12 % (BENCHMARKS.md, issue 35).
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = 4000") }
            try Self.migrator.migrate(pool)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB && Self.isEncrypted(path) {
            // Opened without its key: say so rather than SQLite's "file is not a database".
            throw LocalStoreError(
                operation: "open \(path)",
                underlying: ValueError(
                    kind: "store", reason: "it is encrypted: open it with its key (OfflineSyncEncryption)"))
        } catch {
            throw LocalStoreError(operation: "open \(path)", underlying: error)
        }
    }

    /// Whether the store at `path` has an encrypted store's key file beside it (docs/encryption.md).
    private static func isEncrypted(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path + "-key") else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: 8)).map { Array($0) == Array("OSYNCKEY".utf8) } ?? false
    }

    /// Opens (or creates) the store `name.sqlite` where the platform keeps an app's own data:
    /// `Application Support/OfflineSync/` on Apple platforms, `$XDG_DATA_HOME/OfflineSync/` (by default
    /// `~/.local/share/OfflineSync/`) on Linux. The folder is created when missing.
    ///
    /// For example:
    /// ```swift
    /// let store = try SQLiteLocalStore(named: "todo")
    /// ```
    /// - Parameter name: The store's name: 1–64 letters, digits, `-`, `_` or `.`, not starting with `.`.
    /// - Throws: `ValueError` for a bad name; ``LocalStoreError`` when the folder or the file cannot be
    ///   created or opened.
    public convenience init(named name: String = "OfflineSync") throws {
        try self.init(path: try Self.defaultPath(named: name))
    }

    /// Opens (or creates) the store of one account, `name@ACCOUNT.sqlite` beside the stores of ``init(named:)``,
    /// and binds it to `account` at once — so that an app keeps each person's data in a store of their own (alice's
    /// stays for her next sign-in while bob uses the device with his), and writes made before the first sync are
    /// already known to be the account's. The binding check stays in force: a token for another account is refused
    /// (``AccountError``).
    ///
    /// For example, when someone signs in:
    /// ```swift
    /// guard let account = SyncClient.accountID(ofToken: token) else { … }   // the token's `sub`
    /// let store = try SQLiteLocalStore(named: "todo", account: account)
    /// ```
    /// - Parameters:
    ///   - name: The store's name (see ``init(named:)``).
    ///   - account: The account: the `sub` of its tokens, or the ``SyncClient/Configuration/accountID`` the app sets.
    /// - Throws: `ValueError` for a bad name or an empty account; ``LocalStoreError`` when the file cannot be opened;
    ///   ``AccountError`` when the file holds another account's data (two ids that share a file name: ids longer
    ///   than 64 characters are shortened with a hash).
    public convenience init(named name: String, account: String) throws {
        try self.init(path: try Self.defaultPath(named: name, account: account))
        let bound: String
        do {
            bound = try pool.write { db in
                let access = LocalStoreWriter(db: db, store: self)
                if let bound = try access.setting(AccountGuard.key) { return bound }
                try access.setSetting(account, for: AccountGuard.key)
                return account
            }
        } catch let error as DatabaseError {
            throw LocalStoreError(operation: "bind the store to its account", underlying: error)
        }
        guard bound == account else { throw AccountError.otherAccount(store: bound, request: account) }
    }

    /// The file ``init(named:account:)`` opens: the account's id follows `@`, with every character but ASCII
    /// letters, digits, `-` and `.` written as `_` and its UTF-8 bytes in hex; past 64 characters it is cut and a
    /// hash of the whole id (FNV-1a, 64 bits) added.
    ///
    /// - Parameters:
    ///   - name: The store's name (see ``init(named:)``).
    ///   - account: The account's id.
    /// - Returns: The file's path.
    /// - Throws: `ValueError` for a bad name or an empty account; ``LocalStoreError`` when the folder cannot be
    ///   created.
    public static func defaultPath(named name: String, account: String) throws -> String {
        guard !account.isEmpty else { throw ValueError(kind: "account", reason: "it is empty") }
        var escaped = ""
        for byte in account.utf8 {
            let scalar = Unicode.Scalar(byte)
            if scalar.properties.isAlphabetic && scalar.isASCII || ("0"..."9").contains(scalar) || byte == 0x2D
                || byte == 0x2E
            {
                escaped.unicodeScalars.append(scalar)
            } else {
                escaped += "_" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        if escaped.count > 64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in account.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            escaped = escaped.prefix(47) + "_" + String(hash, radix: 16).leftPadded(to: 16)
        }
        let path = try defaultPath(named: name)
        return String(path.dropLast(".sqlite".count)) + "@" + escaped + ".sqlite"
    }

    /// The file ``init(named:)`` opens, creating its folder.
    ///
    /// - Parameter name: The store's name (see ``init(named:)``).
    /// - Returns: The file's path.
    /// - Throws: `ValueError` for a bad name; ``LocalStoreError`` when the folder cannot be created.
    public static func defaultPath(named name: String) throws -> String {
        let allowed = name.unicodeScalars.allSatisfy {
            ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)))
                || "-_.".unicodeScalars.contains($0)
        }
        guard (1...64).contains(name.count), allowed, !name.hasPrefix(".") else {
            throw ValueError(
                kind: "store name", reason: "use 1–64 letters, digits, '-', '_' or '.', not starting with '.'")
        }
        do {
            let folder = try FileManager.default.url(
                for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true
            ).appendingPathComponent("OfflineSync", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return folder.appendingPathComponent(name + ".sqlite").path
        } catch {
            throw LocalStoreError(operation: "create the folder for the store '\(name)'", underlying: error)
        }
    }

    /// Runs `body` in one write transaction: all its changes are kept, or none if it throws.
    ///
    /// - Parameter body: The work, given a writer valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, or a store failure.
    func write<T: Sendable>(_ body: @escaping @Sendable (LocalStoreWriter) throws -> T) async throws -> T {
        do {
            return try await pool.write { db in try body(LocalStoreWriter(db: db, store: self)) }
        } catch let error as DatabaseError {
            throw LocalStoreError(operation: "write", underlying: explained(error))
        }
    }

    /// Runs `body` on a consistent snapshot.
    ///
    /// - Parameter body: The work, given a reader valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, or a store failure.
    func read<T: Sendable>(_ body: @escaping @Sendable (LocalStoreReader) throws -> T) async throws -> T {
        do {
            return try await pool.read { db in try body(LocalStoreWriter(db: db, store: self)) }
        } catch let error as DatabaseError {
            throw LocalStoreError(operation: "read", underlying: explained(error))
        }
    }

    /// An encrypted store's I/O error as the page that did not authenticate (its typed error), else the error.
    private func explained(_ error: DatabaseError) -> any Error {
        guard error.resultCode == .SQLITE_IOERR, let failure = encryption?.takeFailure() else { return error }
        return failure
    }

    /// Observes what `fetch` reads from `tables`: emits its value at once, then again after each committed
    /// change to those tables whose result differs from the last one emitted (changes to other tables, or ones
    /// that leave the result as it was, emit nothing). Quick commits may be merged into one value; the last
    /// value always reflects the last commit.
    ///
    /// - Parameters:
    ///   - tables: The sync tables `fetch` reads (made ready to be observed even before their first row).
    ///   - fetch: Reads the value, on a consistent snapshot.
    /// - Returns: The values, until the consumer stops iterating (or its task is cancelled); the stream
    ///   finishes with ``LocalStoreError`` when the store fails, or with what `fetch` throws.
    ///
    /// Observes with GRDB's `ValueObservation`, which tracks exactly the rows tables `fetch` reads, in this
    /// process and in others that write the same file.
    func observe<T: Sendable & Equatable>(
        _ tables: [TableName], _ fetch: @escaping @Sendable (LocalStoreReader) throws -> T
    ) -> AsyncThrowingStream<T, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: T.self)
        let task = Task {
            do {
                // A table with no rows table yet would be read as empty without being tracked.
                try await write { writer in for table in tables { try writer.prepareTable(table) } }
                let observation = ValueObservation.tracking { db in
                    try fetch(LocalStoreWriter(db: db, store: self))
                }
                .removeDuplicates()
                for try await value in observation.values(in: pool) { continuation.yield(value) }
                continuation.finish()
            } catch let error as DatabaseError {
                continuation.finish(throwing: LocalStoreError(operation: "observe", underlying: error))
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Runs `body` while this client holds the store's push lock: one push at a time per store, across
    /// every client and process that opened it, so that two pushes never send the same operation.
    /// Waits while another holder has it. The lock is let go when `body` ends, and by the system when
    /// the process dies.
    ///
    /// - Parameter body: The push.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, ``LocalStoreError`` when the lock cannot be taken, or
    ///   `CancellationError` when the task is cancelled while waiting (the lock was not taken).
    func withPushLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw LocalStoreError(operation: "open \(lockPath)", underlying: POSIXLockError(code: errno))
        }
        defer { close(descriptor) }  // closing lets the lock go
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                throw LocalStoreError(operation: "lock \(lockPath)", underlying: POSIXLockError(code: code))
            }
            try await Task.sleep(for: .milliseconds(20))  // another client or process is pushing
        }
        return try await body()
    }

    /// Erases everything the store holds — every table's rows, the queue, operation errors, cursors, items to
    /// fetch again, settings, attached files and an import's leftover copy of an old store — so that no byte of it is
    /// left in the store's files. `check` runs first, in the same transaction: what it throws stops the erase with
    /// nothing erased.
    ///
    /// - Parameter check: Reads the store before it is erased (a sign-out refuses while changes wait).
    /// - Throws: What `check` throws; ``LocalStoreError`` when the store cannot be erased.
    ///
    /// Deletes every row of every table, with `secure_delete` so that freed space is zeroed, then rebuilds the
    /// file (`VACUUM`) and empties the `-wal` (a `TRUNCATE` checkpoint, which waits for other connections'
    /// reads to end, as long as the busy timeout). The tables themselves stay (other clients on the file keep
    /// using them); their names are the app's schema, not its users' data.
    func erase(after check: @escaping @Sendable (LocalStoreReader) throws -> Void) async throws {
        do {
            try await pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA secure_delete = ON")
                defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
                try db.inTransaction(.immediate) {
                    try check(LocalStoreWriter(db: db, store: self))
                    let tables = try String.fetchAll(
                        db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
                    for table in tables where table != "grdb_migrations" {
                        try db.execute(sql: "DELETE FROM \"\(table.replacingOccurrences(of: "\"", with: "\"\""))\"")
                    }
                    return .commit
                }
                try db.execute(sql: "VACUUM")
                _ = try db.checkpoint(.truncate)
            }
            try? FileManager.default.removeItem(at: attachmentDirectory)
            ImportWorkingCopies.removeStale(databasePath)
        } catch let error as DatabaseError {
            throw LocalStoreError(operation: "erase", underlying: error)
        }
    }

    /// The row table of a sync table.
    static func rowTable(_ table: TableName) -> String {
        "\"rows_\(table.canonical)\""
    }
}

/// An error of a store's own files whose description holds no item contents (as an encrypted store's page that did not
/// authenticate): ``LocalStoreError`` shows its description.
public protocol DescribedStoreFailure: Error, CustomStringConvertible {}

/// The local store failed: the file could not be opened, read or written.
public struct LocalStoreError: Error, Sendable, CustomStringConvertible {
    /// What the store was doing.
    public var operation: String
    /// The database's error.
    public var underlying: any Error

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - operation: What the store was doing.
    ///   - underlying: The database's error.
    public init(operation: String, underlying: any Error) {
        self.operation = operation
        self.underlying = underlying
    }

    /// One line naming the operation and the database's message (no item contents).
    public var description: String {
        let reason =
            (underlying as? DatabaseError)?.message ?? (underlying as? POSIXLockError)?.description
            ?? (underlying as? ValueError)?.description ?? (underlying as? any DescribedStoreFailure)?.description
            ?? String(describing: type(of: underlying))
        return "Local store could not \(operation): \(reason)"
    }
}

extension String {
    /// The string after enough `0`s to make it `width` characters long.
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}

/// A system call on the lock file failed.
struct POSIXLockError: Error, CustomStringConvertible {
    var code: Int32
    var description: String { String(cString: strerror(code)) }
}
