import Foundation
public import SyncCore

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

/// A file attached to a row: the row's field holds ``hash``, the SHA-256 of the file's bytes, so the same bytes are
/// stored and sent once (docs/attachments.md).
public struct Attachment: Sendable, Hashable, Codable {
    /// The SHA-256 of the bytes, 64 lowercase hex digits: what the row's field holds.
    public var hash: String
    /// The size in bytes.
    public var size: Int

    /// Creates an attachment's description.
    ///
    /// - Parameters:
    ///   - hash: The SHA-256 of the bytes.
    ///   - size: The size in bytes.
    public init(hash: String, size: Int) {
        self.hash = hash
        self.size = size
    }

    /// Whether `text` is a SHA-256 as rows hold it: 64 lowercase hex digits.
    static func isHash(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// A file waiting to be uploaded (``SyncClient/pendingAttachments()``).
public struct PendingAttachment: Sendable, Hashable {
    /// The file.
    public var attachment: Attachment
    /// The table it goes to.
    public var table: TableName
    /// Why the server refused it for good, when it did: it is not sent again until attached again (the change that
    /// names it is then refused too, and parked).
    public var refusal: String?
}

/// Which files of a table's rows a pull downloads (``SyncClient/syncTable(_:of:attachments:)``).
public struct AttachmentPolicy: Sendable, Hashable {
    /// When files are downloaded.
    public enum Download: Sendable, Hashable {
        /// When the app asks for one (``SyncTable/file(for:field:progress:)``). The default.
        case onDemand
        /// Right after each pull of the table, for the rows that pull stored, within the cache's limit
        /// (``SyncClient/Configuration/attachmentCacheLimit``): for data a user must have offline. A file a failure
        /// stopped is tried again after the next pull; one evicted is downloaded again when opened, or when its row
        /// comes again. The first pull with this policy also goes through the rows the table held before.
        case afterPull
    }

    /// The fields whose values name files.
    public var fields: Set<String>
    /// When their files are downloaded.
    public var download: Download

    /// A policy.
    ///
    /// - Parameters:
    ///   - fields: The fields whose values name files.
    ///   - download: When their files are downloaded; on demand by default.
    public init(fields: Set<String>, download: Download = .onDemand) {
        self.fields = fields
        self.download = download
    }
}

/// How far files have moved: reported after each part sent or received
/// (``SyncClient/Configuration/onTransferProgress``).
public struct TransferProgress: Sendable, Hashable {
    /// Which way.
    public enum Direction: Sendable, Hashable {
        /// Files going to the server (a push).
        case upload
        /// Files coming from it.
        case download
    }

    /// Which way.
    public var direction: Direction
    /// The file moving now.
    public var hash: String
    /// Its bytes moved so far (those the server already held count as moved).
    public var completedBytes: Int
    /// Its size.
    public var totalBytes: Int
    /// The files of this transfer done so far.
    public var completedFiles: Int
    /// The files of this transfer.
    public var totalFiles: Int
}

/// Why a file could not be attached, read or moved.
public struct AttachmentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The field's value is not a SHA-256.
        case notAHash
        /// The server has no file by that hash that this user may read.
        case notOnServer
        /// The bytes that came did not hash to the name: nothing was kept.
        case corrupt
        /// The server refused the file for good (too large, not allowed); it is not sent again.
        case refused
        /// A local file could not be read or written.
        case file
    }

    /// What went wrong.
    public var code: Code
    /// The file, when known.
    public var hash: String?
    /// One readable sentence.
    public var message: String

    /// One line.
    public var description: String { message }
}

/// Runs blocking file work (reads, writes, syncs of large files) on a Dispatch thread, so that it never holds one of
/// the few threads every task of the app shares.
func offCooperativeThreads<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global(qos: .utility).async { continuation.resume(with: Result { try work() }) }
    }
}

/// The files of a store's folder: named by their hash, written whole before they get that name; in an encrypted store,
/// sealed in chunks (``SealedAttachment``).
struct AttachmentFiles: Sendable {
    let directory: URL
    /// The encrypted store's sealing of files; nil: files as they are.
    var sealing: SealedAttachment?

    /// The file of `hash` (present or not).
    func url(_ hash: String) -> URL { directory.appendingPathComponent(hash) }
    /// The download under way of `hash`.
    func partURL(_ hash: String) -> URL { directory.appendingPathComponent(hash + ".part") }

    func makeDirectory() throws {
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw AttachmentError(
                code: .file, hash: nil, message: "Cannot make the attachments folder \(directory.path): \(error)")
        }
    }

    func exists(_ hash: String) -> Bool { FileManager.default.fileExists(atPath: url(hash).path) }

    /// The count of the file's own bytes at `url` (sealed: without the header, nonces and tags), or nil.
    func size(_ url: URL) -> Int? {
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue
        guard sealing != nil else { return size }
        return size.map { SealedAttachment.plainSize(fileSize: $0) }
    }

    /// Stores `data` under its hash: written to a temporary file, synced, then renamed, so the name always holds the
    /// whole file.
    func store(_ data: Data) throws -> Attachment {
        try makeDirectory()
        let hash = Self.hex(SHA256.hash(data: data))
        if !exists(hash) {
            let temporary = directory.appendingPathComponent(UUID().uuidString + ".tmp")
            do {
                if let sealing {
                    let writer = try SealedWriter(creating: temporary, sealing: sealing)
                    defer { writer.close() }
                    try writer.write(data)
                    try writer.finish(hash: SealedAttachment.hashBytes(hash))
                } else {
                    try data.write(to: temporary)
                }
                try place(temporary, as: hash)
            } catch {
                try? FileManager.default.removeItem(at: temporary)
                throw AttachmentError(code: .file, hash: hash, message: "Cannot store the attachment: \(error)")
            }
        }
        return Attachment(hash: hash, size: data.count)
    }

    /// Copies the file at `source` under its hash, reading it in pieces (so memory stays flat for any size).
    func store(contentsOf source: URL) throws -> Attachment {
        try makeDirectory()
        let temporary = directory.appendingPathComponent(UUID().uuidString + ".tmp")
        do {
            let output = try DownloadOutput(creating: temporary, sealing: sealing)
            defer { output.close() }
            let input = try FileHandle(forReadingFrom: source)
            defer { try? input.close() }
            var hasher = SHA256()
            var size = 0
            while let piece = try input.read(upToCount: 1 << 20), !piece.isEmpty {
                hasher.update(data: piece)
                try output.append(piece)
                size += piece.count
            }
            let digest = hasher.finalize()
            try output.finish(hash: Array(digest))
            let hash = Self.hex(digest)
            if exists(hash) {
                try FileManager.default.removeItem(at: temporary)
            } else {
                try place(temporary, as: hash)
            }
            return Attachment(hash: hash, size: size)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw AttachmentError(
                code: .file, hash: nil, message: "Cannot attach \(source.path): \(error.localizedDescription)")
        }
    }

    /// Gives a complete file its name; `synced` says whether its bytes are on the disk already.
    func place(_ file: URL, as hash: String, synced: Bool = false) throws {
        if !synced {
            let handle = try FileHandle(forWritingTo: file)
            try handle.synchronize()
            try handle.close()
        }
        if exists(hash) { try FileManager.default.removeItem(at: url(hash)) }
        try FileManager.default.moveItem(at: file, to: url(hash))
    }

    /// A hasher fed the bytes of the download under way at `url`, read in pieces.
    func hasher(of url: URL) throws -> SHA256 {
        var hasher = SHA256()
        if let sealing {
            try SealedReader(sealing: sealing, url: url, hash: nil).forEachChunk { hasher.update(data: $0) }
            return hasher
        }
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty { hasher.update(data: piece) }
        return hasher
    }

    static func hex(_ digest: SHA256.Digest) -> String {
        digest.map { String(format: "%02x", $0) }.joined()
    }

    /// Reads `count` bytes of the file of `hash` from `offset`.
    func read(_ hash: String, offset: Int, count: Int) throws -> Data {
        if let sealing {
            do {
                return try SealedReader(sealing: sealing, url: url(hash), hash: SealedAttachment.hashBytes(hash))
                    .read(offset: offset, count: count)
            } catch is SealedAttachmentError, is CryptoKitError {
                throw AttachmentError(
                    code: .corrupt, hash: hash, message: "The file of attachment \(hash) did not authenticate")
            }
        }
        let handle = try FileHandle(forReadingFrom: url(hash))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        return try handle.read(upToCount: count) ?? Data()
    }

    /// The whole file of `hash` (opened, in a sealed store).
    func contents(_ hash: String) throws -> Data {
        guard sealing != nil else {
            do { return try Data(contentsOf: url(hash)) } catch {
                throw AttachmentError(code: .file, hash: hash, message: "Cannot read attachment \(hash): \(error)")
            }
        }
        return try read(hash, offset: 0, count: Int.max)
    }

    /// Feeds the plain bytes of the file of `hash` to `body`, a piece at a time (each sealed chunk opened).
    func forEachPiece(of hash: String, _ body: (Data) throws -> Void) throws {
        if let sealing {
            do {
                try SealedReader(sealing: sealing, url: url(hash), hash: SealedAttachment.hashBytes(hash))
                    .forEachChunk(body)
            } catch is CryptoKitError {
                throw SealedAttachmentError()
            }
            return
        }
        let handle = try FileHandle(forReadingFrom: url(hash))
        defer { try? handle.close() }
        while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty { try body(piece) }
    }

    /// Writes the file of `hash` to `destination` as plain bytes, a piece at a time; a partial copy is removed.
    func copy(_ hash: String, to destination: URL) throws {
        let manager = FileManager.default
        do {
            if manager.fileExists(atPath: destination.path) { try manager.removeItem(at: destination) }
            guard sealing != nil else { return try manager.copyItem(at: url(hash), to: destination) }
            guard manager.createFile(atPath: destination.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown)
            }
            let output = try FileHandle(forWritingTo: destination)
            defer { try? output.close() }
            do {
                try forEachPiece(of: hash) { try output.write(contentsOf: $0) }
            } catch is SealedAttachmentError {
                throw AttachmentError(
                    code: .corrupt, hash: hash, message: "The file of attachment \(hash) did not authenticate")
            }
        } catch let error as AttachmentError {
            try? manager.removeItem(at: destination)
            throw error
        } catch {
            try? manager.removeItem(at: destination)
            throw AttachmentError(
                code: .file, hash: hash, message: "Cannot write attachment \(hash) to \(destination.path): \(error)")
        }
    }

    /// Removes the file of `hash` and any download of it under way.
    func remove(_ hash: String) {
        try? FileManager.default.removeItem(at: url(hash))
        try? FileManager.default.removeItem(at: partURL(hash))
    }

    /// Removes what a crash left: temporary copies of attachments never stored, older than an hour (a younger one may
    /// be an attach under way).
    func removeLeftovers(now: Date) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasSuffix(".tmp") {
            let file = directory.appendingPathComponent(name)
            let modified = (try? FileManager.default.attributesOfItem(atPath: file.path))?[.modificationDate] as? Date
            if let modified, now.timeIntervalSince(modified) > 3_600 { try? FileManager.default.removeItem(at: file) }
        }
    }
}

/// Where a file's bytes go as they come (a download, a copy being attached): a plain file, or a sealed one.
enum DownloadOutput: Sendable {
    case plain(FileHandle)
    case sealed(SealedWriter)

    /// A new file at `url` (made or emptied).
    init(creating url: URL, sealing: SealedAttachment?, keepsPartial: Bool = false) throws {
        if let sealing {
            self = .sealed(try SealedWriter(creating: url, sealing: sealing, keepsPartial: keepsPartial))
        } else {
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown)
            }
            self = .plain(try FileHandle(forWritingTo: url))
        }
    }

    /// The download under way at `url`, continued at its end.
    init(resuming url: URL, sealing: SealedAttachment?) throws {
        if let sealing {
            self = .sealed(try SealedWriter(resuming: url, sealing: sealing))
        } else {
            let handle = try FileHandle(forWritingTo: url)
            try handle.seekToEnd()
            self = .plain(handle)
        }
    }

    func append(_ data: Data) throws {
        switch self {
        case .plain(let handle): try handle.write(contentsOf: data)
        case .sealed(let writer): try writer.write(data)
        }
    }

    /// Drops every byte written.
    func reset() throws {
        switch self {
        case .plain(let handle):
            try handle.truncate(atOffset: 0)
            try handle.seek(toOffset: 0)
        case .sealed(let writer): try writer.reset()
        }
    }

    /// The last bytes came: a sealed file binds its end to `hash`; both are synced.
    func finish(hash: [UInt8]) throws {
        switch self {
        case .plain(let handle): try handle.synchronize()
        case .sealed(let writer): try writer.finish(hash: hash)
        }
    }

    func close() {
        switch self {
        case .plain(let handle): try? handle.close()
        case .sealed(let writer): writer.close()
        }
    }
}
