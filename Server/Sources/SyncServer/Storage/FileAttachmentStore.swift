import Crypto
import Foundation
import NIOCore
import SyncSQLite
import _NIOFileSystem

/// Attachments on the filesystem, for the SQLite store (one process): `files/<sha256>` holds each stored file,
/// `uploads/<uploader>-<sha256>` each unfinished upload (its size is what arrived), and `uploaders/<sha256>/<uploader>`
/// who uploaded a file. A file's modification time is when it was last touched; an upload's, when it last grew.
///
/// A file appears by a rename once its bytes hash to its name, so a reader never sees half of one. Touching and
/// collecting a file take one lock, so that a file a write has just named is never collected.
final class FileAttachmentStore: AttachmentStore {
    let directory: URL
    let now: @Sendable () -> Date
    /// The uploads a request is adding to now, each with the signal that stops it.
    private let busy = Locked([String: Receiver]())
    /// Held while a file is touched, or checked and removed by a collection.
    private let lifecycle = Locked(())

    /// Opens (creating) the store in `directory`.
    ///
    /// - Throws: ``TableStoreError/unavailable(_:)`` when the directories cannot be made.
    init(directory: URL, now: @escaping @Sendable () -> Date) throws {
        self.directory = directory
        self.now = now
        do {
            for folder in ["files", "uploads", "uploaders"] {
                try FileManager.default.createDirectory(
                    at: directory.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
        } catch {
            throw TableStoreError.unavailable("cannot make the attachments directory \(directory.path): \(error)")
        }
    }

    private func file(_ hash: AttachmentHash) -> String { directory.appendingPathComponent("files/\(hash)").path }
    private func upload(_ key: String) -> String { directory.appendingPathComponent("uploads/\(key)").path }
    private func uploaders(_ hash: AttachmentHash) -> URL { directory.appendingPathComponent("uploaders/\(hash)") }
    private func uploadKey(_ hash: AttachmentHash, _ uploader: String) -> String {
        Self.uploaderKey(uploader) + "-" + hash.hex
    }

    private func fileSize(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }

    private func modified(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    private func stamp(_ path: String) throws {
        try FileManager.default.setAttributes([.modificationDate: now()], ofItemAtPath: path)
    }

    func size(of hash: AttachmentHash) async throws -> Int? { fileSize(file(hash)) }

    func isUploader(_ uploader: String, of hash: AttachmentHash) async throws -> Bool {
        FileManager.default.fileExists(atPath: uploaders(hash).appendingPathComponent(Self.uploaderKey(uploader)).path)
    }

    func received(_ hash: AttachmentHash, by uploader: String) async throws -> Int {
        fileSize(upload(uploadKey(hash, uploader))) ?? 0
    }

    func unfinished(by uploader: String) async throws -> [AttachmentHash: Int] {
        let prefix = Self.uploaderKey(uploader) + "-"
        var uploads: [AttachmentHash: Int] = [:]
        let names =
            (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("uploads").path))
        for name in names ?? [] where name.hasPrefix(prefix) {
            guard let hash = AttachmentHash(String(name.dropFirst(prefix.count))) else { continue }
            uploads[hash] = fileSize(upload(name)) ?? 0
        }
        return uploads
    }

    func receive<Body: AsyncSequence & Sendable>(
        _ hash: AttachmentHash, by uploader: String, offset: Int, total: Int?, restart: Bool, body: Body
    ) async throws -> UploadOutcome where Body.Element == ByteBuffer {
        let key = uploadKey(hash, uploader)
        let path = upload(key)
        let receiver = try await takeOver(key, path: path)
        defer { busy.withLock { if $0[key] === receiver { $0[key] = nil } } }
        if restart { try? FileManager.default.removeItem(atPath: path) }
        let start = fileSize(path) ?? 0
        // Every byte arrived but the file was not named (the process died, or the caller gave up, while its hash was
        // checked): any part sent again finishes it (its bytes are dropped).
        let holdsAll = total.map { $0 > 0 && start == $0 && offset < start } ?? false
        guard offset == start || holdsAll else { throw UploadRefusal.wrongOffset(received: start) }
        var position = start
        do {
            try await FileSystem.shared.withFileHandle(
                forWritingAt: FilePath(path), options: .modifyFile(createIfNecessary: true)
            ) { handle in
                defer { try? stamp(path) }
                // What arrived before a body was cut is kept, to resume from. Parts are not synced one by one: after a
                // crash the upload holds what reached the disk, and its hash is checked at the end; a stored file is
                // synced before it gets its name. A later request of the same uploader for the same upload stops the
                // wait for more bytes (``takeOver(_:path:)``).
                let written = Locked(position)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await buffer in body where !holdsAll {
                            let at = written.withLock { $0 }
                            if let total, at + buffer.readableBytes > total {
                                throw UploadRefusal.sizeMismatch(received: at)
                            }
                            try await handle.write(contentsOf: buffer.readableBytesView, toAbsoluteOffset: Int64(at))
                            written.withLock { $0 += buffer.readableBytes }
                        }
                    }
                    group.addTask {
                        for await _ in receiver.stopped.stream {}  // ends when told to stop, or cancelled
                        if !Task.isCancelled { throw UploadRefusal.busy(received: written.withLock { $0 }) }
                    }
                    defer { group.cancelAll() }
                    try await group.next()
                }
                position = written.withLock { $0 }
                if total.map({ position >= $0 }) ?? true { try await handle.synchronize() }
            }
        } catch let error as FileSystemError {
            throw TableStoreError.unavailable("cannot write the upload of \(hash): \(error.message)")
        }
        if let total, position < total { return .partial(received: position) }
        return try await finish(hash, by: uploader, path: path, size: position)
    }

    /// Names a whole upload's file once its bytes hash to `hash` (or drops it, when the server holds the file
    /// already), and records the caller as one of its uploaders.
    ///
    /// - Throws: ``UploadRefusal/hashMismatch(actual:)`` (the upload is dropped).
    private func finish(_ hash: AttachmentHash, by uploader: String, path: String, size: Int) async throws
        -> UploadOutcome
    {
        let actual = try await Self.digest(path)
        guard actual == hash else {
            try? FileManager.default.removeItem(atPath: path)
            throw UploadRefusal.hashMismatch(actual: actual)
        }
        let stored = try lifecycle.withLock { _ in
            let target = file(hash)
            let stored = !FileManager.default.fileExists(atPath: target)
            if stored {
                try FileManager.default.moveItem(atPath: path, toPath: target)
            } else {
                try FileManager.default.removeItem(atPath: path)
            }
            try stamp(target)
            try FileManager.default.createDirectory(at: uploaders(hash), withIntermediateDirectories: true)
            FileManager.default.createFile(
                atPath: uploaders(hash).appendingPathComponent(Self.uploaderKey(uploader)).path, contents: nil)
            return stored
        }
        return .complete(size: size, stored: stored)
    }

    /// A request adding to an upload now, and the signal that stops its wait for more bytes.
    private final class Receiver: Sendable {
        let stopped = AsyncStream<Void>.makeStream()
    }

    /// Makes this request the one adding to upload `key`. An earlier one still at it — its client went quiet without
    /// closing (a phone whose network dropped mid-part), which would hold the upload until the body timeout — is told
    /// to stop waiting for bytes, keeping what it wrote, and this one goes on from there once it has (within a second;
    /// else, or when the earlier one is checking the hash, the upload is busy: 409).
    private func takeOver(_ key: String, path: String) async throws -> Receiver {
        let receiver = Receiver()
        for _ in 0..<50 {
            let earlier = busy.withLock { busy -> Receiver? in
                if let earlier = busy[key] { return earlier }
                busy[key] = receiver
                return nil
            }
            guard let earlier else { return receiver }
            earlier.stopped.continuation.finish()
            try await Task.sleep(for: .milliseconds(20))
        }
        throw UploadRefusal.busy(received: fileSize(path) ?? 0)
    }

    /// The SHA-256 of the file at `path`, read in pieces.
    static func digest(_ path: String) async throws -> AttachmentHash {
        var hasher = SHA256()
        try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(path)) { handle in
            for try await chunk in handle.readChunks(chunkLength: .bytes(Int64(attachmentPieceSize * 4))) {
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            }
        }
        return AttachmentHash(hasher.finalize())
    }

    func read(
        _ hash: AttachmentHash, range: Range<Int>, into write: (ByteBuffer) async throws -> Void
    ) async throws {
        try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(file(hash))) { handle in
            for try await chunk in handle.readChunks(
                in: Int64(range.lowerBound)..<Int64(range.upperBound), chunkLength: .bytes(Int64(attachmentPieceSize)))
            {
                try await write(chunk)
            }
        }
    }

    func touch(_ hash: AttachmentHash) async throws -> Bool {
        lifecycle.withLock { _ in (try? stamp(file(hash))) != nil }
    }

    func collect(before cutoff: Date, isNamed: @Sendable (AttachmentHash) async throws -> Bool) async throws
        -> CollectionCount
    {
        var count = CollectionCount()
        let files = directory.appendingPathComponent("files")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: files.path)) ?? [] {
            guard let hash = AttachmentHash(name), let date = modified(file(hash)), date < cutoff,
                try await !isNamed(hash)
            else { continue }
            // Touched since it was checked: a write names it.
            let size: Int? = lifecycle.withLock { _ in
                guard let date = modified(file(hash)), date < cutoff else { return nil }
                let size = fileSize(file(hash)) ?? 0
                try? FileManager.default.removeItem(atPath: file(hash))
                try? FileManager.default.removeItem(at: uploaders(hash))
                return size
            }
            if let size {
                count.files += 1
                count.bytes += size
            }
        }
        let uploads = directory.appendingPathComponent("uploads")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? [] {
            let path = upload(name)
            guard let date = modified(path), date < cutoff else { continue }
            let removed = busy.withLock { busy in
                busy[name] == nil && (try? FileManager.default.removeItem(atPath: path)) != nil
            }
            if removed { count.uploads += 1 }
        }
        return count
    }
}
