import HTTPTypes
import SyncCore

/// The attachment store and its limits.
struct AttachmentFiles: Sendable {
    let store: any AttachmentStore
    let maxSize: Int
    /// Each uploader's budget of unfinished uploads (``AttachmentSettings/maxUnfinishedUploads``,
    /// ``AttachmentSettings/maxUnfinishedBytes``).
    var maxUnfinishedUploads = Int.max
    var maxUnfinishedBytes = Int.max
}

/// Who may read a file of a table's attachment columns (docs/attachments.md): its uploader, or a caller who may read a
/// row that names it; and the check of the files a write names.
struct AttachmentRules: Sendable {
    let tables: any TableStore
    let access: TableAccess
    /// Where the files are kept; nil when the server keeps none.
    let files: AttachmentFiles?

    /// Who the caller is to the store: their subject, or nobody in particular on a server without auth.
    static func uploader(_ call: TableCall) -> String { call.caller?.subject ?? "" }

    /// Whether the caller may read `hash`: they uploaded it, or a row of `schema` they may read names it. 401 or 403
    /// when they may not read the table.
    func mayRead(_ hash: AttachmentHash, _ schema: TableSchema, _ store: any AttachmentStore, _ call: TableCall)
        async throws -> Bool
    {
        let scope = try await access.authorize(.read, schema, call)
        if try await store.isUploader(Self.uploader(call), of: hash) { return true }
        return try await names(hash, in: schema, scope: scope)
    }

    /// Whether a live row of `schema` within `scope` names `hash` in one of its attachment columns.
    func names(_ hash: AttachmentHash, in schema: TableSchema, scope: RowScope) async throws -> Bool {
        let query = AttachmentCollector.query(naming: hash, in: schema.configuration, includeDeleted: false)
        let page = try await mappingStoreErrors {
            try await tables.query(schema.name, query, scope: scope, limit: 1, maxBytes: 1 << 16)
        }
        return page.itemCount > 0
    }

    /// Checks the files a write names (``TableConfiguration/attachmentColumns``), before the write hooks: each must be
    /// a SHA-256 the server holds, uploaded by the caller or named by a row the caller may read — else 400, so that no
    /// row ever names a file that is not there (the same answer whether or not another user holds it). Each file is
    /// touched, so that no collection takes it while the write goes on.
    func check(_ fields: [String: JSONValue], _ schema: TableSchema, _ call: TableCall) async throws {
        for column in schema.configuration.attachmentColumns {
            guard let value = fields[column], value != .null else { continue }
            guard let hash = value.stringValue.flatMap(AttachmentHash.init) else {
                throw APIError.badRequest(
                    "Invalid item: '\(column)' names a file by the SHA-256 of its bytes (64 lowercase hex digits), or is null"
                )
            }
            let missing = APIError.badRequest(
                "Invalid item: the file \(hash) that '\(column)' names is not on the server: upload it first (PUT /tables/\(schema.name)/attachments/\(hash))",
                reason: .attachmentMissing)
            guard let store = files?.store, try await store.touch(hash) else { throw missing }
            if try await store.isUploader(Self.uploader(call), of: hash) { continue }
            let readScope = try? await access.authorize(.read, schema, call)
            guard let readScope, try await names(hash, in: schema, scope: readScope) else { throw missing }
        }
    }
}
