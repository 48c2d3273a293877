public import Foundation
public import SyncCore

/// Files attached to rows (docs/attachments.md): a photo taken offline is attached at once, shown from the store's
/// folder, and uploaded by the next push before the row's change — once, by its SHA-256.
extension SyncTable {
    /// Attaches `data` to `field` of the item `id`: the bytes are stored in the store's folder under their SHA-256,
    /// and the row's field set to that hash, its update queued and the file queued for upload — the row and the
    /// queue in one transaction. The next push uploads the file (in parts, resumed after a crash or a lost
    /// connection) before it sends the row's change; the same bytes attached twice are stored and sent once.
    ///
    /// For example:
    /// ```swift
    /// let photo = try await inspections.attach(jpeg, to: inspection.id, field: "photo")
    /// ```
    /// - Parameters:
    ///   - data: The file's bytes.
    ///   - id: The item's id.
    ///   - field: The field that names the file (its value becomes the hash; a `String?` in the item type).
    /// - Returns: The attachment: its hash and size.
    /// - Throws: ``LocalWriteError`` when the item does not exist locally or its delete is pending; ``AttachmentError``
    ///   when the file cannot be stored; `ValueError` for a field that is a system property. Cancellation before
    ///   the row is written leaves only a file no row names, removed later.
    @discardableResult
    public func attach(_ data: Data, to id: ItemID, field: String) async throws -> Attachment {
        try Self.checkField(field)
        let files = client.context.attachments.files
        let attachment = try await offCooperativeThreads { try files.store(data) }
        _ = try await client.context.attachments.attach(attachment, to: id, field: field, in: name)
        return attachment
    }

    /// Attaches the file at `url` to `field` of the item `id`, as ``attach(_:to:field:)`` does with bytes: the file is
    /// copied into the store's folder in pieces, so any size takes little memory.
    ///
    /// - Parameters:
    ///   - url: A local file.
    ///   - id: The item's id.
    ///   - field: The field that names the file.
    /// - Returns: The attachment: its hash and size.
    /// - Throws: As ``attach(_:to:field:)``; ``AttachmentError`` when the file cannot be read.
    @discardableResult
    public func attach(contentsOf url: URL, to id: ItemID, field: String) async throws -> Attachment {
        try Self.checkField(field)
        let files = client.context.attachments.files
        let attachment = try await offCooperativeThreads { try files.store(contentsOf: url) }
        _ = try await client.context.attachments.attach(attachment, to: id, field: field, in: name)
        return attachment
    }

    /// The local file that `field` of the item `id` names, downloaded first when it is not in the store's folder
    /// (in parts, resumed where an earlier download stopped, checked by its hash before it is kept).
    ///
    /// For example:
    /// ```swift
    /// if let url = try await inspections.file(for: inspection.id, field: "photo") { show(url) }
    /// ```
    /// - Parameters:
    ///   - id: The item's id.
    ///   - field: The field that names the file.
    ///   - progress: Called after each part received.
    /// - Returns: The file's URL (read it before the cache may evict it: copy it to keep it), or nil when the item
    ///   does not exist or the field is null.
    /// - Throws: ``AttachmentError`` (not a hash, not on the server, corrupt), ``ServerUnavailableError`` after the
    ///   retries. Cancellation stops the download between parts; what arrived is kept for the next try.
    ///
    /// An encrypted store (`OfflineSyncEncryption`) keeps its files sealed: read them with ``data(for:field:progress:)``
    /// or ``writeFile(for:field:to:progress:)``; this throws ``AttachmentError`` (`.file`) there.
    public func file(for id: ItemID, field: String, progress: (@Sendable (TransferProgress) -> Void)? = nil)
        async throws -> URL?
    {
        guard let hash = try await hash(for: id, field: field) else { return nil }
        let attachments = client.context.attachments
        if attachments.files.sealing != nil {
            throw AttachmentError(
                code: .file, hash: hash,
                message: "The store is encrypted: read its files with data(for:field:) or writeFile(for:field:to:)")
        }
        return try await attachments.localFile(hash, table: name, progress: progress)
    }

    /// The bytes of the file that `field` of the item `id` names, downloaded first as ``file(for:field:progress:)``
    /// does; in an encrypted store, opened chunk by chunk (each checked, the whole bound to its hash).
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - field: The field that names the file.
    ///   - progress: Called after each part received.
    /// - Returns: The bytes (all in memory: use ``writeFile(for:field:to:progress:)`` for large files), or nil when
    ///   the item does not exist or the field is null.
    /// - Throws: As ``file(for:field:progress:)``; ``AttachmentError`` (`.corrupt`) when a sealed file does not
    ///   authenticate. Cancellation stops a download between parts.
    public func data(for id: ItemID, field: String, progress: (@Sendable (TransferProgress) -> Void)? = nil)
        async throws -> Data?
    {
        guard let hash = try await hash(for: id, field: field) else { return nil }
        let attachments = client.context.attachments
        _ = try await attachments.localFile(hash, table: name, progress: progress)
        let files = attachments.files
        return try await offCooperativeThreads { try files.contents(hash) }
    }

    /// Writes the file that `field` of the item `id` names to `destination` (replacing a file there), downloaded
    /// first as ``file(for:field:progress:)`` does; in an encrypted store, opened chunk by chunk as it is written, so
    /// any size takes little memory. The copy is the app's: plain, outside the store.
    ///
    /// - Parameters:
    ///   - id: The item's id.
    ///   - field: The field that names the file.
    ///   - destination: Where to write it.
    ///   - progress: Called after each part received.
    /// - Returns: Whether there was a file (false when the item does not exist or the field is null).
    /// - Throws: As ``data(for:field:progress:)``; ``AttachmentError`` (`.file`) when `destination` cannot be
    ///   written (a partial copy is removed). Cancellation stops a download between parts.
    @discardableResult
    public func writeFile(
        for id: ItemID, field: String, to destination: URL, progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> Bool {
        guard let hash = try await hash(for: id, field: field) else { return false }
        let attachments = client.context.attachments
        _ = try await attachments.localFile(hash, table: name, progress: progress)
        let files = attachments.files
        try await offCooperativeThreads { try files.copy(hash, to: destination) }
        return true
    }

    /// The hash `field` of the item `id` holds; nil when the item does not exist or the field is null.
    private func hash(for id: ItemID, field: String) async throws -> String? {
        let name = self.name
        guard let item = try await client.store.read({ try $0.item(id, in: name) }) else { return nil }
        guard let value = item[field], value != .null else { return nil }
        guard let hash = value.stringValue, Attachment.isHash(hash) else {
            throw AttachmentError(
                code: .notAHash, hash: nil, message: "'\(field)' of \(name) \(id) does not name a file (not a SHA-256)")
        }
        return hash
    }

    /// Downloads the files the pulled rows name, when the table's policy says to after a pull; else forgets them.
    func prefetchAfterPull() async throws {
        guard let policy = attachmentPolicy else { return }
        guard policy.download == .afterPull else {
            // Noted by the pull for a policy that does not fetch ahead: forgotten (and the rows gone through again
            // should the table fetch ahead later), with a write only when there is something to forget.
            let name = self.name
            let seeded = AttachmentTransfers.prefetchSeededKey(name)
            guard
                try await client.store.read({ try !$0.filesToFetch(in: name).isEmpty || $0.setting(seeded) != nil })
            else { return }
            try await client.store.write { writer in
                try writer.forgetFilesToFetch(nil, in: name)
                try writer.setSetting(nil, for: seeded)
            }
            return
        }
        try await client.context.attachments.prefetchAttachments(in: name)
    }

    /// Records the fields of this table's policy, so that the store keeps their files while rows name them.
    func recordAttachmentFields() async throws {
        guard let fields = attachmentPolicy?.fields, !fields.isEmpty else { return }
        let name = self.name
        try await client.store.write { writer in
            for field in fields { try writer.addAttachmentField(field, in: name) }
        }
    }

    private static func checkField(_ field: String) throws {
        guard !field.isEmpty, SystemProperty(rawValue: field) == nil else {
            throw ValueError(kind: "field", reason: "'\(field)' cannot name a file: it is empty or a system property")
        }
    }
}
