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
    public func file(for id: ItemID, field: String, progress: (@Sendable (TransferProgress) -> Void)? = nil)
        async throws -> URL?
    {
        let name = self.name
        guard let item = try await client.store.read({ try $0.item(id, in: name) }) else { return nil }
        guard let value = item[field], value != .null else { return nil }
        guard let hash = value.stringValue, Attachment.isHash(hash) else {
            throw AttachmentError(
                code: .notAHash, hash: nil, message: "'\(field)' of \(name) \(id) does not name a file (not a SHA-256)")
        }
        return try await client.context.attachments.localFile(hash, table: name, progress: progress)
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
