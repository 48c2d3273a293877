import Crypto
import Foundation
import GRDBSQLite

/// The VFS shim (docs/encryption.md): once an encrypted store is opened in the process, a VFS that wraps the
/// platform's default becomes the default. A file of a registered store (its database, WAL and rollback journal) is
/// encrypted page by page with ``PageCipher``; every other file is the platform VFS's own, untouched (its open goes
/// straight to it, so it pays nothing per read or write).
enum EncryptingVFS {
    /// The stores registered, by the database's full path: their page cipher.
    private static let registry = Registry()

    final class Registry: @unchecked Sendable {  // @unchecked: `stores` and `failures` behind `lock`.
        private let lock = NSLock()
        private var stores: [String: PageCipher] = [:]
        private var failures: [String: StoreEncryptionError] = [:]

        func cipher(for path: String) -> PageCipher? { lock.withLock { stores[path] } }
        func register(_ path: String, _ cipher: PageCipher) { lock.withLock { stores[path] = cipher } }
        func unregister(_ path: String) { _ = lock.withLock { stores.removeValue(forKey: path) } }
        /// Records a page that did not authenticate, for the store's database path.
        func fail(_ path: String, _ error: StoreEncryptionError) { lock.withLock { failures[path] = error } }
        /// The last failure recorded for the store, cleared.
        func takeFailure(_ path: String) -> StoreEncryptionError? {
            lock.withLock { failures.removeValue(forKey: path) }
        }
    }

    /// Registers a store's page cipher under its database's path (and installs the VFS first).
    static func register(_ path: String, cipher: PageCipher) throws {
        try install()
        registry.register(path, cipher)
    }

    /// Forgets a store: its files are the platform's own again in this process (it was made plain).
    static func unregister(_ path: String) { registry.unregister(path) }

    /// The last page of the store's files that did not authenticate since the last call, if any.
    static func takeFailure(_ path: String) -> StoreEncryptionError? { registry.takeFailure(path) }

    // MARK: Installation

    private static let installation = Installation()

    /// The VFS structures, made and registered once per process.
    final class Installation: @unchecked Sendable {  // @unchecked: set once behind `lock`, before SQLite can call us.
        // `base` and `methods` are read without the lock by the VFS's functions: SQLite calls them only after
        // `sqlite3_vfs_register` (under SQLite's own mutex) published the VFS that the writes under `lock` preceded.
        let lock = NSLock()
        var vfs: UnsafeMutablePointer<sqlite3_vfs>?
        var base: UnsafeMutablePointer<sqlite3_vfs>?
        var methods: UnsafeMutablePointer<sqlite3_io_methods>?
    }

    static var base: UnsafeMutablePointer<sqlite3_vfs>? { installation.base }
    static var methods: UnsafeMutablePointer<sqlite3_io_methods>? { installation.methods }

    static func install() throws {
        try installation.lock.withLock {
            guard installation.vfs == nil else { return }
            guard let base = sqlite3_vfs_find(nil) else {
                throw StoreEncryptionError.vfsUnavailable("SQLite has no default VFS")
            }
            let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
            vfs.initialize(to: base.pointee)
            let name = strdup("offlinesync-encrypted")
            vfs.pointee.zName = UnsafePointer(name)
            vfs.pointee.pNext = nil
            vfs.pointee.szOsFile = Int32(FileLayout.inner) + base.pointee.szOsFile
            vfs.pointee.xOpen = encryptedOpen
            let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
            methods.initialize(to: Self.ioMethods)
            installation.base = base
            installation.methods = methods
            let code = sqlite3_vfs_register(vfs, 1)
            guard code == SQLITE_OK else { throw StoreEncryptionError.vfsUnavailable("SQLite refused it (\(code))") }
            installation.vfs = vfs
        }
    }

    /// Where things sit in the file structure SQLite allocates (`szOsFile` bytes): the `sqlite3_file` header, the
    /// state's pointer, then the platform's file.
    enum FileLayout {
        static let state = 8
        static let inner = 16
    }

    /// The state of one encrypted file.
    final class FileState {
        let role: PageCipher.Role
        let cipher: PageCipher
        /// The store's database path (failures are recorded under it) and the file's own.
        let store: String
        let path: String
        let inner: UnsafeMutablePointer<sqlite3_file>

        init(
            role: PageCipher.Role, cipher: PageCipher, store: String, path: String,
            inner: UnsafeMutablePointer<sqlite3_file>
        ) {
            self.role = role
            self.cipher = cipher
            self.store = store
            self.path = path
            self.inner = inner
        }

        var innerMethods: sqlite3_io_methods? { inner.pointee.pMethods?.pointee }
    }

    static func state(_ file: UnsafeMutablePointer<sqlite3_file>?) -> FileState? {
        guard let file else { return nil }
        let slot = UnsafeMutableRawPointer(file).advanced(by: FileLayout.state).assumingMemoryBound(
            to: UnsafeMutableRawPointer?.self)
        return slot.pointee.map { Unmanaged<FileState>.fromOpaque($0).takeUnretainedValue() }
    }
}

// MARK: - The VFS's open

private let encryptedOpen:
    @convention(c) (
        UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, UnsafeMutablePointer<sqlite3_file>?, Int32,
        UnsafeMutablePointer<Int32>?
    ) -> Int32 = { _, name, file, flags, outFlags in
        guard let base = EncryptingVFS.base, let open = base.pointee.xOpen, let file else { return SQLITE_ERROR }
        let path = name.map { String(cString: $0) }
        let role: PageCipher.Role? =
            flags & SQLITE_OPEN_MAIN_DB != 0
            ? .database : flags & SQLITE_OPEN_WAL != 0 ? .wal : flags & SQLITE_OPEN_MAIN_JOURNAL != 0 ? .journal : nil
        var store = path ?? ""
        if role == .wal, store.hasSuffix("-wal") { store.removeLast(4) }
        if role == .journal, store.hasSuffix("-journal") { store.removeLast(8) }
        guard let role, let path, let cipher = EncryptingVFS.registryCipher(store) else {
            // Not an encrypted store's file: the platform's own, in the whole structure.
            return open(base, name, file, flags, outFlags)
        }
        let raw = UnsafeMutableRawPointer(file)
        let inner = raw.advanced(by: EncryptingVFS.FileLayout.inner).assumingMemoryBound(to: sqlite3_file.self)
        file.pointee.pMethods = nil
        let code = open(base, name, inner, flags, outFlags)
        guard code == SQLITE_OK else { return code }
        let state = EncryptingVFS.FileState(role: role, cipher: cipher, store: store, path: path, inner: inner)
        raw.advanced(by: EncryptingVFS.FileLayout.state).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
            .pointee = Unmanaged.passRetained(state).toOpaque()
        file.pointee.pMethods = UnsafePointer(EncryptingVFS.methods)
        return SQLITE_OK
    }

extension EncryptingVFS {
    static func registryCipher(_ store: String) -> PageCipher? { registry.cipher(for: store) }
    static func recordFailure(_ state: FileState, _ position: UInt64) {
        registry.fail(state.store, .tampered(file: state.path, page: position))
    }
}
