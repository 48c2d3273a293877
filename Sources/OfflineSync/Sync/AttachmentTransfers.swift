import Foundation
import Logging
import SyncCore
import SyncOData
import SyncSQLite

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

/// Attaches, uploads, downloads and evicts the files of rows, each transfer as its plan (``UploadPlan``,
/// ``DownloadPlan``) decides.
struct AttachmentTransfers: SyncRunner {
    let parts: SyncParts
    /// Parts, cache and progress of attached files.
    let attachmentSettings: AttachmentSettings
    /// The downloads of files running now, by hash: a second caller waits for the first instead of writing the same
    /// part file.
    let downloads = Locked<[String: Task<Void, any Error>]>([:])
}

/// The client's settings for files (from ``SyncClient/Configuration``).
struct AttachmentSettings: Sendable {
    var chunkSize: Int
    var cacheLimit: Int
    var onProgress: (@Sendable (TransferProgress) -> Void)?
}

/// Files attached to rows (docs/attachments.md): attached in the row's own transaction, uploaded in parts before any
/// operation of a push goes (so the server never holds a row naming a file it lacks), downloaded in parts when asked
/// or after a pull, evicted past the cache's limit (never one waiting to go), removed when no row names them.
extension AttachmentTransfers {
    var files: AttachmentFiles {
        AttachmentFiles(directory: store.attachmentDirectory, sealing: store.attachmentKey.map(SealedAttachment.init))
    }

    /// Attaches a stored file to `field` of the item `id`: the row's change, its queued update and the file's record,
    /// in one transaction.
    func attach(_ attachment: Attachment, to id: ItemID, field: String, in table: TableName) async throws -> JSONValue {
        let now = now().timeIntervalSince1970
        let stored = try await store.write { writer in
            guard var row = try writer.item(id, in: table) else {
                throw LocalWriteError(.notFound, table: table, itemID: id)
            }
            row[field] = .string(attachment.hash)
            let stored = try SyncContext.apply(.update, row, in: table, writer: writer)
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

    /// Runs an ``UploadPlan``: sends what it asks and hands it each answer, until the server stores the file.
    private func upload(_ record: AttachmentRecord, index: Int, of total: Int) async throws {
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(record.table)"
        let url = endpoint.attachmentURL(record.table, hash: record.hash)
        var plan = UploadPlan(
            size: record.size, chunkSize: attachmentSettings.chunkSize, conflictLimit: retry.limit + 2)
        var reply = try await sendRetrying(logger: log) { try await endpoint.send("HEAD", url, features: ["AT"]) }
        var action = plan.head(status: reply.status, uploadOffset: reply.header("Upload-Offset").flatMap { Int($0) })
        transfer: while true {
            switch action {
            case .refused:
                return try await refuse(record, reply)
            case .unavailable(let conflicts):
                throw SyncStop.unavailable(ServerUnavailableError(.status(409), attempts: conflicts))
            case .stored:
                report(.upload, record.hash, plan.offset, record.size, index, total)
                break transfer
            case .send(let start, let count, let wait):
                report(.upload, record.hash, plan.offset, record.size, index, total)
                if wait {
                    do { try await retry.clock.sleep(for: .seconds(1)) } catch { throw SyncStop.cancelled }
                }
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
                reply = try await sendRetrying(logger: log) {
                    try await endpoint.send(
                        "PUT", url, data: data, contentType: "application/octet-stream", features: ["AT"],
                        extraHeaders: range)
                }
                action = plan.answered(
                    status: reply.status, uploadOffset: reply.header("Upload-Offset").flatMap { Int($0) })
            }
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

    private func report(
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
            let (task, started) = downloads.withLock { running -> (Task<Void, any Error>, Bool) in
                if let task = running[hash] { return (task, false) }
                let task = Task { try await download(hash, table: table, index: index, of: total, progress: progress) }
                running[hash] = task
                return (task, true)
            }
            if started {
                defer { downloads.withLock { $0[hash] = nil } }
                try await withTaskCancellationHandler {
                    try await task.value
                } onCancel: {
                    task.cancel()
                }
            } else {
                try await task.value
            }
        } catch SyncStop.unavailable(let error) {
            throw error
        } catch SyncStop.unauthorized {
            throw AttachmentError(
                code: .refused, hash: hash, message: "The server refused the credentials (401) for attachment \(hash)")
        } catch SyncStop.cancelled {
            throw CancellationError()
        }
        let size = files.size(files.url(hash)) ?? 0
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
        let files = self.files
        try files.makeDirectory()
        let part = files.partURL(hash)
        let url = endpoint.attachmentURL(table, hash: hash)
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        let earlier = await resumed(part)
        var hasher = earlier.hasher
        let writer = try earlier.output ?? DownloadOutput(creating: part, sealing: files.sealing, keepsPartial: true)
        defer { writer.close() }
        var plan = DownloadPlan(chunkSize: attachmentSettings.chunkSize, offset: earlier.offset)
        while !plan.isComplete {
            let range = plan.range
            let reply = try await sendRetrying(logger: log) {
                try await endpoint.send("GET", url, features: ["AT"], extraHeaders: ["Range": range])
            }
            let step = plan.answered(
                status: reply.status, contentRange: reply.header("Content-Range"), bodyCount: reply.body.count)
            try await Self.take(step, of: reply, into: writer, hashing: &hasher, hash: hash, table: table)
            report(.download, hash, plan.offset, plan.size ?? plan.offset, index, total, progress)
        }
        let digest = hasher.finalize()
        let actual = AttachmentFiles.hex(digest)
        guard actual == hash else {
            try? FileManager.default.removeItem(at: part)
            throw AttachmentError(
                code: .corrupt, hash: hash, message: "The bytes of attachment \(hash) hash to \(actual): not kept")
        }
        try await offCooperativeThreads { try writer.finish(hash: Array(digest)) }
        try files.place(part, as: hash, synced: true)
        report(.download, hash, plan.offset, plan.offset, index + 1, total, progress)
    }

    /// What an earlier try left of a download: kept, hashed first, and continued; a part that does not read back whole
    /// (a sealed chunk a crash tore) starts again.
    private func resumed(_ part: URL) async -> (offset: Int, hasher: SHA256, output: DownloadOutput?) {
        let files = self.files
        guard FileManager.default.fileExists(atPath: part.path), let size = files.size(part), size > 0 else {
            return (0, SHA256(), nil)
        }
        do {
            let hasher = try await offCooperativeThreads { try files.hasher(of: part) }
            return (size, hasher, try DownloadOutput(resuming: part, sealing: files.sealing))
        } catch {
            return (0, SHA256(), nil)
        }
    }

    /// Does what a download's plan decided of one answer: the body appended or in place of what came before, the
    /// part started again, or the download refused.
    private static func take(
        _ step: DownloadPlan.Step, of reply: HTTPResponseData, into writer: DownloadOutput,
        hashing hasher: inout SHA256, hash: String, table: TableName
    ) async throws {
        let body = reply.body
        switch step {
        case .append:
            try await offCooperativeThreads { try writer.append(body) }
            hasher.update(data: body)
        case .replace:
            try writer.reset()
            try await offCooperativeThreads { try writer.append(body) }
            hasher = SHA256()
            hasher.update(data: body)
        case .restart:
            try writer.reset()
            hasher = SHA256()
        case .empty:
            break
        case .unlabelled:
            throw AttachmentError(code: .corrupt, hash: hash, message: "A part of \(hash) came unlabelled")
        case .notFound:
            throw AttachmentError(
                code: .notOnServer, hash: hash,
                message: "The server has no attachment \(hash) in \(table) that this user may read")
        case .refused:
            throw AttachmentError(
                code: .refused, hash: hash,
                message: "The server refused attachment \(hash): \(reply.status)\(reply.message.map { " \($0)" } ?? "")"
            )
        }
    }

    /// Downloads the files that rows pulled into `table` since the last prefetch name (noted by
    /// ``PullRunner/store(_:in:writer:)``) and that are not here, while the cache has room; only those rows are read
    /// (and, the first time the table fetches ahead, every row it held before, once).
    /// A file downloaded, already here, or past the cache's room is forgotten (it is downloaded when opened); one a
    /// failure stopped is tried again after the next pull.
    ///
    /// - Throws: ``AttachmentError`` or ``SyncStop`` as ``localFile(_:table:index:of:progress:)`` does.
    func prefetchAttachments(in table: TableName) async throws {
        // The first time the table fetches ahead, the rows it already holds are gone through once.
        let seeded = Self.prefetchSeededKey(table)
        if try await store.read({ try $0.setting(seeded) }) == nil {
            try await store.write { writer in
                try writer.noteAllFilesToFetch(in: table)
                try writer.setSetting("1", for: seeded)
            }
        }
        let listed = try await store.read { try $0.filesToFetch(in: table) }
        guard !listed.isEmpty else { return }
        // Not a file's name (a row's field holding other text), or here already: forgotten.
        let missing = listed.filter { Attachment.isHash($0) && !files.exists($0) }
        var settled = Array(Set(listed).subtracting(missing))
        var room = attachmentSettings.cacheLimit - (try await cachedBytes())
        do {
            for (index, hash) in missing.enumerated() {
                guard room > 0 else {
                    settled += missing[index...]
                    break
                }
                let url = try await localFile(hash, table: table, index: index, of: missing.count)
                room -= files.size(url) ?? 0
                settled.append(hash)
            }
        } catch {
            // The failure is what the caller hears; a file left noted is found here next time and forgotten then.
            try? await store.write { [settled] in try $0.forgetFilesToFetch(settled, in: table) }
            throw error
        }
        try await store.write { [settled] in try $0.forgetFilesToFetch(settled, in: table) }
    }

    /// The setting that says `table`'s rows were gone through once for the download ahead.
    static func prefetchSeededKey(_ table: TableName) -> String { "prefetchSeeded.\(table.canonical)" }

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
