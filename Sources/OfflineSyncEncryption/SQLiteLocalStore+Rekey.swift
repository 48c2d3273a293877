import Foundation
import GRDB
import GRDBSQLite
public import OfflineSync

extension SQLiteLocalStore {
    /// Changes the key of the closed encrypted store at `path` (docs/encryption.md, "Changing the key"), its attachment
    /// files sealed again under the new key (one that does not read back whole is left out, to be downloaded again). Crash-safe:
    /// a process stopped at any point leaves the store readable with the old key or with the new one — the old until
    /// the re-encrypted copy is complete, the new from then on (the next open finishes the move).
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - old: The store's key.
    ///   - new: Its new key.
    /// - Throws: the errors of ``SQLiteLocalStore/encrypted(path:key:)`` for `old`, ``StoreEncryptionError/inUse(path:)``
    ///   when a connection has the store open, and ``LocalStoreError`` when a file cannot be written (the store is
    ///   left as it was). Not cancellable: it copies the whole database once.
    public static func changeKey(path: String, from old: StoreKey, to new: StoreKey) throws {
        try StoreReencryption.run(path: path, from: old, to: new)
    }

    /// Encrypts the closed plain store at `path` with `key`, crash-safe as ``changeKey(path:from:to:)``; its
    /// attachment files are sealed too.
    ///
    /// - Throws: ``StoreEncryptionError/alreadyEncrypted(path:)``, ``StoreEncryptionError/inUse(path:)``, and
    ///   ``LocalStoreError`` when the store cannot be read or a file cannot be written (the store is left plain). Not
    ///   cancellable.
    public static func encryptInPlace(path: String, key: StoreKey) throws {
        try StoreReencryption.run(path: path, from: nil, to: key)
    }

    /// Turns the closed encrypted store at `path` back into a plain one, crash-safe as ``changeKey(path:from:to:)``;
    /// its attachment files are opened, and its key file goes.
    ///
    /// - Throws: the errors of ``SQLiteLocalStore/encrypted(path:key:)`` for `key`,
    ///   ``StoreEncryptionError/inUse(path:)``, and ``LocalStoreError`` when a file cannot be written (the store is
    ///   left encrypted). Not cancellable.
    public static func decryptInPlace(path: String, key: StoreKey) throws {
        try StoreReencryption.run(path: path, from: key, to: nil)
    }
}

/// A store's files replaced by a copy under another key, or none (``StoreReplacement``'s commit point).
enum StoreReencryption {
    /// Where a test stops the run, as a crash there would: the files as they are at that point.
    enum Step: CaseIterable, Sendable {
        case copyStarted, copied, committed, storeMoved, attachmentsMoved, keyMoved
    }

    struct Stopped: Error {}

    static func run(path: String, from old: StoreKey?, to new: StoreKey?, stopAfter: Step? = nil) throws {
        let database = try EncryptedStoreFiles.fullPath(path)
        func reached(_ step: Step) throws { if step == stopAfter { throw Stopped() } }
        do {
            try StoreReplacement.finish(database)
            let manager = FileManager.default
            let keyFile = EncryptedStoreFiles.keyPath(database)
            var oldAttachmentKey: [UInt8]?
            if let old {
                oldAttachmentKey = try EncryptedStoreFiles.prepare(database, key: old, creating: false).attachmentKey
            } else if manager.fileExists(atPath: keyFile) {
                throw StoreEncryptionError.alreadyEncrypted(path: database)
            }
            let build = StoreReplacement.buildFolder(database)
            try manager.createDirectory(atPath: build, withIntermediateDirectories: false)
            try reached(.copyStarted)
            let copy = build + "/" + StoreReplacement.storeName
            // The copy's name is the same each time: a plain copy must not meet an earlier encrypted one's cipher.
            EncryptingVFS.unregister(copy)
            defer { EncryptingVFS.unregister(copy) }
            let cipher = try prepareCopy(copy, in: build, key: new)
            try copyDatabase(database, to: copy, encrypted: new != nil)
            try sync(copy)
            // The attachment files, sealed under the new key (or opened), beside the copy.
            try StoreReplacement.copyAttachments(
                from: database + ".attachments", key: oldAttachmentKey,
                to: build + "/" + StoreReplacement.attachmentsName, key: cipher?.attachmentKey)
            try reached(.copied)
            // The commit point: from here on the new store stands.
            try StoreReplacement.replace(StoreReplacement.folder(database), with: build)
            StoreReplacement.syncFolder(of: database)
            try reached(.committed)
            try StoreReplacement.finish(database) { move in
                switch move {
                case .store: try reached(.storeMoved)
                case .attachments: try reached(.attachmentsMoved)
                case .key: try reached(.keyMoved)
                }
            }
            // This process's opens of the store from now on: the new cipher, or none.
            if let cipher {
                try EncryptingVFS.register(database, cipher: cipher)
            } else {
                EncryptingVFS.unregister(database)
            }
        } catch let error as StoreEncryptionError {
            throw error
        } catch let error as Stopped {
            throw error
        } catch let error as LocalStoreError {
            throw error
        } catch {
            throw LocalStoreError(operation: "re-encrypt \(database)", underlying: error)
        }
    }

    /// Readies the copy's folder for `new`: its key's header beside the copy, and its cipher registered for the copy
    /// (one nonce sequence for the copy and the store after); for no key, the marker of a plain store.
    ///
    /// - Returns: The new key's cipher, or nil for a plain store.
    private static func prepareCopy(_ copy: String, in build: String, key new: StoreKey?) throws -> PageCipher? {
        guard let new else {
            try Data().write(to: URL(fileURLWithPath: build + "/" + StoreReplacement.plainName))
            return nil
        }
        let (header, pageKey) = try KeyHeader.new(for: new)
        let key = build + "/" + StoreReplacement.keyName
        try Data(header.bytes).write(to: URL(fileURLWithPath: key))
        try sync(key)
        let cipher = PageCipher(key: pageKey)
        try EncryptingVFS.register(copy, cipher: cipher)
        return cipher
    }

    /// Copies the database whole (`VACUUM INTO`) with the reserved bytes the target needs: 28 for the cipher, or
    /// none for a plain copy. Holds the store exclusively meanwhile, after emptying its WAL into it.
    static func copyDatabase(_ database: String, to copy: String, encrypted: Bool) throws {
        var configuration = Configuration()
        configuration.busyMode = .immediateError
        let queue = try DatabaseQueue(path: database, configuration: configuration)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in
            do {
                try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
                try db.execute(sql: "BEGIN EXCLUSIVE; COMMIT")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                throw StoreEncryptionError.inUse(path: database)
            }
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size")
            if encrypted, pageSize != PageCipher.pageSize {
                throw StoreEncryptionError.invalidKey(
                    "the store's pages are \(pageSize ?? 0) bytes; an encrypted store's are \(PageCipher.pageSize)")
            }
            var reserved = Int32(encrypted ? PageCipher.reservedBytes : 0)
            let code = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserved)
            guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code)) }
            try db.execute(sql: "VACUUM INTO ?", arguments: [copy])
        }
    }

    /// Makes a file's bytes durable.
    static func sync(_ path: String) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.synchronize()
    }
}
