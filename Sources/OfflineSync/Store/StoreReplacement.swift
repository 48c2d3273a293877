import Foundation

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The last steps of replacing a store's files with a re-encrypted copy (a new key, encryption turned on or off:
/// `OfflineSyncEncryption`), made crash-safe by a commit point: the copy is built in `<database>-replace.tmp/` and
/// the folder is renamed `<database>-replace/` once complete. Every open of the store first calls ``finish(_:)``: a
/// folder still named `.tmp` is an unfinished copy, removed (the old store stands); a committed one is moved into
/// place (the new store stands). Each step can be repeated, so a crash in this one is finished by the next open.
package enum StoreReplacement {
    /// The committed copy's folder.
    package static func folder(_ database: String) -> String { database + "-replace" }
    /// The copy's folder while it is built.
    package static func buildFolder(_ database: String) -> String { database + "-replace.tmp" }
    /// In either folder: the new database, its key header (an encrypted copy), or the marker of a plain copy.
    package static let storeName = "store"
    package static let keyName = "key"
    package static let plainName = "plain"
    /// In either folder: the attachment files, sealed again under the new key (or opened, for a plain copy).
    package static let attachmentsName = "attachments"

    /// The moves of ``finish(_:stop:)``, for a test that stops after one as a crash there would.
    package enum Move: Sendable { case store, attachments, key }

    /// Finishes or undoes a replacement a crash interrupted; nothing when there is none.
    ///
    /// - Parameters:
    ///   - database: The database file.
    ///   - stop: Called after each move (a test throws there to leave the files as a crash would).
    /// - Throws: The file system's error when a step fails (the store is then left for the next open to finish).
    package static func finish(_ database: String, stop: ((Move) throws -> Void)? = nil) throws {
        let manager = FileManager.default
        let build = buildFolder(database)
        if manager.fileExists(atPath: build) { try manager.removeItem(atPath: build) }
        let folder = folder(database)
        guard manager.fileExists(atPath: folder) else { return }
        let store = folder + "/" + storeName
        if manager.fileExists(atPath: store) {
            // The old database's log was checkpointed and emptied before the copy: nothing in it is lost.
            for suffix in ["-wal", "-shm"] where manager.fileExists(atPath: database + suffix) {
                try manager.removeItem(atPath: database + suffix)
            }
            try replace(database, with: store)
            try stop?(.store)
        }
        let attachments = folder + "/" + attachmentsName
        if manager.fileExists(atPath: attachments) {
            let target = database + ".attachments"
            if manager.fileExists(atPath: target) { try manager.removeItem(atPath: target) }
            try replace(target, with: attachments)
            try stop?(.attachments)
        }
        let key = folder + "/" + keyName
        if manager.fileExists(atPath: key) {
            try replace(database + "-key", with: key)
        } else if manager.fileExists(atPath: folder + "/" + plainName),
            manager.fileExists(atPath: database + "-key")
        {
            try manager.removeItem(atPath: database + "-key")
        }
        try stop?(.key)
        try manager.removeItem(atPath: folder)
        syncFolder(of: database)
    }

    /// Moves `source` over `target` in one step (rename).
    package static func replace(_ target: String, with source: String) throws {
        guard rename(source, target) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: target, "errno": errno])
        }
    }

    /// Makes the folder's entries (a rename) durable.
    package static func syncFolder(of path: String) {
        let folder = (path as NSString).deletingLastPathComponent
        let descriptor = open(folder.isEmpty ? "." : folder, O_RDONLY)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}

extension StoreReplacement {
    /// Copies the attachment files of `source` (sealed with `oldKey`, or plain) into `target` (sealed with `newKey`, or
    /// plain), each checked against its name (its SHA-256) on the way: one that does not read back whole is left out
    /// (the next `file(for:)` downloads it again). Downloads and attaches under way are left out too.
    ///
    /// - Throws: The file system's error when a file cannot be written.
    package static func copyAttachments(
        from sourcePath: String, key oldKey: [UInt8]?, to targetPath: String, key newKey: [UInt8]?
    ) throws {
        let (source, target) = (URL(fileURLWithPath: sourcePath), URL(fileURLWithPath: targetPath))
        let manager = FileManager.default
        guard manager.fileExists(atPath: source.path) else { return }
        try manager.createDirectory(at: target, withIntermediateDirectories: true)
        let old = AttachmentFiles(directory: source, sealing: oldKey.map(SealedAttachment.init))
        let new = newKey.map(SealedAttachment.init)
        for name in try manager.contentsOfDirectory(atPath: source.path).sorted() where Attachment.isHash(name) {
            let file = target.appendingPathComponent(name)
            let output = try DownloadOutput(creating: file, sealing: new)
            var hasher = SHA256()
            do {
                defer { output.close() }
                try old.forEachPiece(of: name) { piece in
                    hasher.update(data: piece)
                    try output.append(piece)
                }
                let digest = hasher.finalize()
                guard AttachmentFiles.hex(digest) == name else { throw SealedAttachmentError() }
                try output.finish(hash: Array(digest))
            } catch is SealedAttachmentError, is AttachmentError {
                try? manager.removeItem(at: file)
            }
        }
    }
}
