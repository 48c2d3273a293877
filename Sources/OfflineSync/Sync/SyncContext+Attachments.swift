import Foundation
import Logging
import SyncCore
import SyncOData

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

/// The client's settings for files (from ``SyncClient/Configuration``).
struct AttachmentSettings: Sendable {
    var chunkSize: Int
    var cacheLimit: Int
    var onProgress: (@Sendable (TransferProgress) -> Void)?
}

/// Files attached to rows (docs/attachments.md): attached in the row's own transaction, uploaded in parts before any
/// operation of a push goes (so the server never holds a row naming a file it lacks), downloaded in parts when asked
/// or after a pull, evicted past the cache's limit (never one waiting to go), removed when no row names them.
extension SyncContext {
    nonisolated var files: AttachmentFiles { AttachmentFiles(directory: store.attachmentDirectory) }

    /// Attaches a stored file to `field` of the item `id`: the row's change, its queued update and the file's record,
    /// in one transaction.
    func attach(_ attachment: Attachment, to id: ItemID, field: String, in table: TableName) async throws -> JSONValue {
        let now = now().timeIntervalSince1970
        let stored = try await store.write { writer in
            guard var row = try writer.item(id, in: table) else {
                throw LocalWriteError(.notFound, table: table, itemID: id)
            }
            row[field] = .string(attachment.hash)
            let stored = try Self.apply(.update, row, in: table, writer: writer)
            try writer.addAttachmentField(field, in: table)
            var record =
                try writer.attachment(attachment.hash)
                ?? AttachmentRecord(
                    hash: attachment.hash, table: table, size: attachment.size, pending: true, cached: true,
                    sequence: try writer.nextAttachmentSequence(), lastUsed: now)
            // Sent (or, when the server holds it, only asked about: one HEAD) before the row; tried again if refused.
            record.pending = true
            record.cached = true
            record.lastUsed = now
            record.failure = nil
            try writer.saveAttachment(record)
            return stored
        }
        try await removeUnnamedAttachments()
        return stored
    }

    // MARK: Upload

    /// Uploads every file waiting to go, in the order attached, before a push sends its operations; the files no row
    /// names any more are dropped first. A file the server refuses for good is marked and left (the operations naming
    /// it are then refused by the server, and parked, while the others go).
    ///
    /// - Throws: ``SyncStop`` when the server is unavailable, refuses the credentials, or the task is cancelled.
    func uploadAttachments() async throws {
        guard try await store.read({ try !$0.attachmentsToUpload().isEmpty }) else { return }
        try await removeUnnamedAttachments()
        let records = try await store.read { try $0.attachmentsToUpload() }
        for (index, record) in records.enumerated() {
            if Task.isCancelled { throw SyncStop.cancelled }
            try await upload(record, index: index, of: records.count)
        }
    }

    private func upload(_ record: AttachmentRecord, index: Int, of total: Int) async throws {
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(record.table)"
        let url = endpoint.attachmentURL(record.table, hash: record.hash)
        let head = try await sendRetrying(logger: log) { try await endpoint.send("HEAD", url, features: ["AT"]) }
        var offset: Int
        switch (head.status, head.header("Upload-Offset").flatMap { Int($0) }) {
        case (200, _): offset = record.size
        case (404, let received?) where received <= record.size: offset = received
        default: return try await refuse(record, head)
        }
        var conflicts = 0
        var stored = head.status == 200
        report(.upload, record.hash, offset, record.size, index, total)
        // Only the server's 200 or 201 says the file is stored. An upload holding every byte is not: the server may
        // have died, or be checking the hash, before naming it — the last part is sent again to finish it.
        while !stored {
            let start = offset < record.size ? offset : max(0, record.size - attachmentSettings.chunkSize)
            let count = min(attachmentSettings.chunkSize, record.size - start)
            let data: Data
            do {
                let files = files
                data = try await offCooperativeThreads { try files.read(record.hash, offset: start, count: count) }
            } catch {
                return try await markFailure(record, "its local file cannot be read: \(error.localizedDescription)")
            }
            guard data.count == count else {
                return try await markFailure(record, "its local file is shorter than its \(record.size) bytes")
            }
            // An empty file goes whole: a range names at least one byte.
            let range = count == 0 ? [:] : ["Content-Range": "bytes \(start)-\(start + count - 1)/\(record.size)"]
            let reply = try await sendRetrying(logger: log) {
                try await endpoint.send(
                    "PUT", url, data: data, contentType: "application/octet-stream", features: ["AT"],
                    extraHeaders: range)
            }
            let received = reply.header("Upload-Offset").flatMap { Int($0) }
            switch reply.status {
            case 200, 201:
                stored = true
                offset = record.size
            case 204 where (received ?? -1) > start && received! <= record.size:
                offset = received!
            case 409 where received.map({ $0 <= record.size }) == true:
                // The upload holds another length (a lost reply), or another request adds to it, or checks it, now.
                conflicts += 1
                guard conflicts <= retry.limit + 2 else {
                    throw SyncStop.unavailable(ServerUnavailableError(.status(409), attempts: conflicts))
                }
                if received == offset {
                    do { try await retry.clock.sleep(for: .seconds(1)) } catch { throw SyncStop.cancelled }
                }
                offset = received!
            default:
                return try await refuse(record, reply)
            }
            report(.upload, record.hash, offset, record.size, index, total)
        }
        try await store.write { writer in
            guard var current = try writer.attachment(record.hash) else { return }
            current.pending = false
            try writer.saveAttachment(current)
        }
        log.debug(
            "Attachment uploaded", metadata: ["sync.attachment": "\(record.hash)", "sync.bytes": "\(record.size)"])
        report(.upload, record.hash, record.size, record.size, index + 1, total)
    }

    /// Records the server's refusal of a file for good.
    private func refuse(_ record: AttachmentRecord, _ reply: HTTPResponseData) async throws {
        try await markFailure(record, "the server answered \(reply.status)\(reply.message.map { ": \($0)" } ?? "")")
    }

    private func markFailure(_ record: AttachmentRecord, _ reason: String) async throws {
        logger.warning(
            "An attachment was not uploaded: \(reason)", metadata: [SyncLogKey.table: "\(record.table)"])
        try await store.write { writer in
            guard var current = try writer.attachment(record.hash) else { return }
            current.failure = reason
            try writer.saveAttachment(current)
        }
    }

    private nonisolated func report(
        _ direction: TransferProgress.Direction, _ hash: String, _ done: Int, _ size: Int, _ files: Int, _ total: Int,
        _ also: (@Sendable (TransferProgress) -> Void)? = nil
    ) {
        let progress = TransferProgress(
            direction: direction, hash: hash, completedBytes: done, totalBytes: size, completedFiles: files,
            totalFiles: total)
        attachmentSettings.onProgress?(progress)
        also?(progress)
    }

    // MARK: Download

    /// The local file of `hash`, downloaded from `table`'s attachments when it is not here: in parts, resumed from
    /// what an earlier download left, checked by its hash before it gets its name.
    ///
    /// - Throws: ``AttachmentError``; ``ServerUnavailableError`` after the retries.
    func localFile(
        _ hash: String, table: TableName, index: Int = 0, of total: Int = 1,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> URL {
        let now = now().timeIntervalSince1970
        if files.exists(hash) {
            try await store.write { writer in
                if var record = try writer.attachment(hash) {
                    record.lastUsed = now
                    record.cached = true
                    try writer.saveAttachment(record)
                }
            }
            return files.url(hash)
        }
        do {
            if let running = downloads[hash] {
                try await running.value
            } else {
                let task = Task { try await download(hash, table: table, index: index, of: total, progress: progress) }
                downloads[hash] = task
                defer { downloads[hash] = nil }
                try await withTaskCancellationHandler {
                    try await task.value
                } onCancel: {
                    task.cancel()
                }
            }
        } catch SyncStop.unavailable(let error) {
            throw error
        } catch SyncStop.unauthorized {
            throw AttachmentError(
                code: .refused, hash: hash, message: "The server refused the credentials (401) for attachment \(hash)")
        } catch SyncStop.cancelled {
            throw CancellationError()
        }
        let size = AttachmentFiles.size(files.url(hash)) ?? 0
        try await store.write { writer in
            var record =
                try writer.attachment(hash)
                ?? AttachmentRecord(
                    hash: hash, table: table, size: size, pending: false, cached: true,
                    sequence: try writer.nextAttachmentSequence(), lastUsed: now)
            record.cached = true
            record.lastUsed = now
            try writer.saveAttachment(record)
        }
        try await evictAttachments()
        return files.url(hash)
    }

    private func download(
        _ hash: String, table: TableName, index: Int, of total: Int, progress: (@Sendable (TransferProgress) -> Void)?
    ) async throws {
        try files.makeDirectory()
        let part = files.partURL(hash)
        if !FileManager.default.fileExists(atPath: part.path) {
            _ = FileManager.default.createFile(atPath: part.path, contents: nil)
        }
        let url = endpoint.attachmentURL(table, hash: hash)
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        var offset = AttachmentFiles.size(part) ?? 0
        // The bytes are hashed as they come (what an earlier try left, first).
        var hasher = offset > 0 ? try await offCooperativeThreads { try AttachmentFiles.hasher(of: part) } : SHA256()
        let output = try FileHandle(forWritingTo: part)
        defer { try? output.close() }
        try output.seek(toOffset: UInt64(offset))
        var size: Int?
        var restarts = 0
        while size.map({ offset < $0 }) ?? true {
            let range = "bytes=\(offset)-\(offset + attachmentSettings.chunkSize - 1)"
            let reply = try await sendRetrying(logger: log) {
                try await endpoint.send("GET", url, features: ["AT"], extraHeaders: ["Range": range])
            }
            switch reply.status {
            case 206:
                guard let total = reply.header("Content-Range").flatMap(Self.totalOfContentRange),
                    reply.header("Content-Range")?.hasPrefix("bytes \(offset)-") == true
                else { throw AttachmentError(code: .corrupt, hash: hash, message: "A part of \(hash) came unlabelled") }
                let body = reply.body
                try await offCooperativeThreads { try output.write(contentsOf: body) }
                hasher.update(data: body)
                offset += body.count
                size = total
            case 200:
                try output.truncate(atOffset: 0)
                try output.seek(toOffset: 0)
                try output.write(contentsOf: reply.body)
                hasher = SHA256()
                hasher.update(data: reply.body)
                offset = reply.body.count
                size = offset
            case 416 where offset == 0 && reply.header("Content-Range").flatMap(Self.totalOfContentRange) == 0:
                size = 0  // An empty file: no range of it can be satisfied.
            case 416 where offset > 0 && restarts == 0:
                // What an earlier download left is longer than the file: start again.
                restarts += 1
                try output.truncate(atOffset: 0)
                try output.seek(toOffset: 0)
                hasher = SHA256()
                offset = 0
            case 404:
                throw AttachmentError(
                    code: .notOnServer, hash: hash,
                    message: "The server has no attachment \(hash) in \(table) that this user may read")
            default:
                throw AttachmentError(
                    code: .refused, hash: hash,
                    message:
                        "The server refused attachment \(hash): \(reply.status)\(reply.message.map { " \($0)" } ?? "")")
            }
            report(.download, hash, offset, size ?? offset, index, total, progress)
        }
        try await offCooperativeThreads { try output.synchronize() }
        let actual = AttachmentFiles.hex(hasher.finalize())
        guard actual == hash else {
            try? FileManager.default.removeItem(at: part)
            throw AttachmentError(
                code: .corrupt, hash: hash, message: "The bytes of attachment \(hash) hash to \(actual): not kept")
        }
        try files.place(part, as: hash, synced: true)
        report(.download, hash, offset, offset, index + 1, total, progress)
    }

    /// The size at the end of `bytes FIRST-LAST/SIZE`.
    static func totalOfContentRange(_ header: String) -> Int? {
        header.split(separator: "/").last.flatMap { Int($0) }
    }

    /// Downloads the files that `fields` of `table`'s rows name and that are not here, while the cache has room.
    func prefetchAttachments(in table: TableName, fields: Set<String>) async throws {
        let wanted = try await store.read { reader -> [String] in
            var hashes: [String] = []
            for item in try reader.items(in: table, matching: .init()) {
                for field in fields.sorted() {
                    if let hash = item[field]?.stringValue, Attachment.isHash(hash) { hashes.append(hash) }
                }
            }
            return hashes
        }
        let missing = Array(NSOrderedSet(array: wanted.filter { !files.exists($0) })) as? [String] ?? []
        var room = attachmentSettings.cacheLimit - (try await cachedBytes())
        for (index, hash) in missing.enumerated() {
            guard room > 0 else { break }
            let url = try await localFile(hash, table: table, index: index, of: missing.count)
            room -= AttachmentFiles.size(url) ?? 0
        }
    }

    private func cachedBytes() async throws -> Int {
        try await store.read { try $0.evictableAttachments().reduce(0) { $0 + $1.size } }
    }

    // MARK: Local clean-up

    /// Removes the least recently used files the server holds while they pass the cache's limit (those waiting to be
    /// uploaded are never removed, and do not count).
    func evictAttachments() async throws {
        let limit = attachmentSettings.cacheLimit
        let evicted = try await store.write { writer -> [String] in
            let records = try writer.evictableAttachments()
            var total = records.reduce(0) { $0 + $1.size }
            var evicted: [String] = []
            for var record in records where total > limit {
                record.cached = false
                try writer.saveAttachment(record)
                total -= record.size
                evicted.append(record.hash)
            }
            return evicted
        }
        for hash in evicted { files.remove(hash) }
    }

    /// Forgets the files that no row names any more (a row deleted, purged, or given another file) and removes them
    /// from the folder, with what a crash left there.
    func removeUnnamedAttachments() async throws {
        // Most stores hold no file: a read says so without taking the writer.
        guard try await store.read({ try !$0.allAttachments().isEmpty }) else { return }
        let removed = try await store.write { writer -> [String] in
            let records = try writer.allAttachments()
            guard !records.isEmpty else { return [] }
            let named = try writer.namedAttachments()
            var removed: [String] = []
            for record in records where !named.contains(record.hash) {
                try writer.removeAttachment(record.hash)
                removed.append(record.hash)
            }
            return removed
        }
        guard !removed.isEmpty else { return }
        // A file attached again meanwhile keeps its bytes.
        let known = try await store.read { reader in try Set(removed.filter { try reader.attachment($0) != nil }) }
        for hash in removed where !known.contains(hash) { files.remove(hash) }
        files.removeLeftovers(now: Date())
    }
}
