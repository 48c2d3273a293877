import Foundation
import GRDB
import GRDBSQLite
public import OfflineSync

extension SQLiteLocalStore {
    /// Opens (or creates) an encrypted store at `path` (docs/encryption.md): every page of its database, WAL and
    /// rollback journal is encrypted with AES-256-GCM under a key derived from `key` and the store's salt, kept with a
    /// key check in the file `<path>-key` beside it. Use it as a plain store; the key stays in memory while the
    /// process runs.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - key: The store's key: the same each time the store is opened.
    ///   - fileProtection: On iOS, tvOS, watchOS and visionOS, the data protection class of the store's folder and
    ///     of every file in it (database, WAL, index, key file, attachments; files made later inherit the folder's);
    ///     nil leaves the app's default. Ignored elsewhere. Not run by our tests (no Apple device here).
    /// - Returns: The open store.
    /// - Throws: ``StoreEncryptionError/wrongKey(path:)`` when the store was encrypted with another key,
    ///   ``StoreEncryptionError/notEncrypted(path:)`` when the file is a plain store (or its key file is gone),
    ///   ``StoreEncryptionError/tampered(file:page:)`` when a page read while opening does not authenticate,
    ///   ``StoreEncryptionError/vfsUnavailable(_:)`` when SQLite refuses the encrypting VFS, and the errors of
    ///   ``SQLiteLocalStore/init(path:)``. Not cancellable: it returns when the store is open (a passphrase
    ///   costs about 0.1 s of key derivation).
    public static func encrypted(path: String, key: StoreKey, fileProtection: StoreFileProtection? = nil) throws
        -> SQLiteLocalStore
    {
        let full = try EncryptedStoreFiles.fullPath(path)
        try fileProtection?.apply(toStoreAt: full)
        do {
            try StoreReplacement.finish(full)  // a change of key or encryption a crash interrupted
        } catch {
            throw LocalStoreError(operation: "open \(full)", underlying: error)
        }
        let cipher = try EncryptedStoreFiles.prepare(full, key: key)
        do {
            // Temporary tables, sorts and statement journals in memory: SQLite names no store for them, so the VFS
            // could not encrypt them, and on disk they would hold rows in the clear.
            let store = try SQLiteLocalStore(
                path: full,
                encryption: .init(
                    connectionSQL: "PRAGMA temp_store = MEMORY", attachmentKey: cipher.attachmentKey,
                    takeFailure: { EncryptingVFS.takeFailure(full) }))
            try fileProtection?.apply(toStoreAt: full)  // the files the open made
            return store
        } catch {
            if let failure = EncryptingVFS.takeFailure(full) { throw failure }
            throw error
        }
    }
}

/// The files of an encrypted store: the key header beside the database, and the database's creation.
enum EncryptedStoreFiles {
    /// The path SQLite names the store's files by: the folder's real path and the file's name.
    static func fullPath(_ path: String) throws -> String {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        guard let real = realpath(folder.path, nil) else { return url.standardizedFileURL.path }
        defer { free(real) }
        return URL(fileURLWithPath: String(cString: real)).appendingPathComponent(url.lastPathComponent).path
    }

    /// The store's key file.
    static func keyPath(_ database: String) -> String { database + "-key" }

    /// Checks the key against the store's key file, or creates both for a new store, and registers the store's
    /// cipher with the VFS. Returns the cipher.
    /// `creating`: whether a missing (or empty) database is made; else it is ``StoreEncryptionError/notEncrypted(path:)``.
    @discardableResult
    static func prepare(_ database: String, key: StoreKey, creating: Bool = true) throws -> PageCipher {
        let manager = FileManager.default
        let size = (try? manager.attributesOfItem(atPath: database)[.size] as? Int) ?? 0
        if size > 0 || !creating {
            guard let bytes = manager.contents(atPath: keyPath(database)), let header = KeyHeader(Array(bytes)) else {
                throw StoreEncryptionError.notEncrypted(path: database)
            }
            guard let pageKey = try key.pageKey(header), KeyHeader.check(pageKey) == header.check else {
                throw StoreEncryptionError.wrongKey(path: database)
            }
            let cipher = PageCipher(key: pageKey)
            try EncryptingVFS.register(database, cipher: cipher)
            return cipher
        }
        // A new store (or one killed before its database was first written): a new salt, then the database made
        // with the bytes the cipher needs reserved on every page.
        let (header, pageKey) = try KeyHeader.new(for: key)
        try Data(header.bytes).write(to: URL(fileURLWithPath: keyPath(database)), options: .atomic)
        let cipher = PageCipher(key: pageKey)
        try EncryptingVFS.register(database, cipher: cipher)
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            var reserved = Int32(PageCipher.reservedBytes)
            let code = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserved)
            guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code)) }
            try db.execute(sql: "PRAGMA page_size = \(PageCipher.pageSize)")
        }
        let queue = try DatabaseQueue(path: database, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "CREATE TABLE offlinesync_new(x); DROP TABLE offlinesync_new")
        }
        try queue.close()
        return cipher
    }
}
