import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where an import reads its copy of an old store: `<database>-import/<UUID>/`, beside the store that imports it, so
/// that a person's old data is never left outside the store's own folder. A copy is removed when its import ends; one
/// a killed process left behind is removed by the next open of the store, the next import and a sign-out.
///
/// A reader holds a shared `flock` on `<database>-import.lock` while its copy exists; a cleanup takes it exclusive,
/// without waiting, and removes the folder only then — when no import of any process is reading. The system lets a
/// dead process's lock go.
enum ImportWorkingCopies {
    /// The folder of the copies.
    static func folder(_ database: String) -> String { database + "-import" }
    /// The file whose lock says that an import reads a copy.
    static func lockFile(_ database: String) -> String { database + "-import.lock" }

    /// Removes the copies a killed import left, unless an import is reading one now. Costs one `stat` when there are
    /// none.
    ///
    /// - Parameter database: The store's database file.
    static func removeStale(_ database: String) {
        guard FileManager.default.fileExists(atPath: folder(database)) else { return }
        let descriptor = open(lockFile(database), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }  // closing lets the lock go
        removeUnlessRead(database, lock: descriptor)
    }

    /// Removes the folder of copies when the lock `descriptor` (on ``lockFile(_:)``) can be taken exclusive at once:
    /// no import of any process is reading a copy.
    private static func removeUnlessRead(_ database: String, lock descriptor: Int32) {
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return }  // an import is reading its copy
        try? FileManager.default.removeItem(atPath: folder(database))
    }

    /// Runs `body` with a new, empty folder for one copy, removed when `body` ends; copies a killed import left are
    /// removed first.
    ///
    /// - Parameters:
    ///   - database: The store's database file.
    ///   - body: Reads with the folder.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws; a `CocoaError` or ``POSIXLockError`` when the folder cannot be made.
    static func with<T>(for database: String, _ body: (URL) throws -> T) throws -> T {
        let descriptor = open(lockFile(database), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw POSIXLockError(code: errno) }
        defer { close(descriptor) }
        removeUnlessRead(database, lock: descriptor)  // what is there then is a killed import's
        while flock(descriptor, LOCK_SH) != 0 {
            guard errno == EINTR else { throw POSIXLockError(code: errno) }
        }
        let copy = URL(fileURLWithPath: folder(database), isDirectory: true)
            .appendingPathComponent(UUID().uuidString, isDirectory: true)
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: copy)
            rmdir(folder(database))  // when no other import's copy is in it
        }
        return try body(copy)
    }
}
