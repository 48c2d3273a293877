import Foundation
import GRDB
import SyncCore

/// A file the store knows, by its SHA-256 (``SyncTable/attach(_:to:field:)``).
struct AttachmentRecord: Sendable, Hashable {
    /// The SHA-256 of its bytes, 64 lowercase hex digits: its name here and on the server.
    var hash: String
    /// The table whose attachment endpoint it is uploaded to and downloaded from.
    var table: TableName
    var size: Int
    /// Whether it waits to be uploaded (then it is never evicted).
    var pending: Bool
    /// Whether its file is in the store's folder.
    var cached: Bool
    /// The order of attachments, which uploads follow.
    var sequence: Int64
    /// When it was last attached, downloaded or opened (seconds since 1970), for eviction.
    var lastUsed: Double
    /// Why the server refused its upload for good (it is not sent again until attached again).
    var failure: String?
}

extension LocalStoreReader {
    private static let attachmentColumns =
        #""hash", "tableName", "size", "pending", "cached", "sequence", "lastUsed", "failure""#

    private func attachment(_ row: Row) throws -> AttachmentRecord {
        AttachmentRecord(
            hash: row["hash"], table: try TableName(row["tableName"] as String), size: row["size"],
            pending: row["pending"], cached: row["cached"], sequence: row["sequence"], lastUsed: row["lastUsed"],
            failure: row["failure"])
    }

    private func attachments(where condition: String, orderBy order: String) throws -> [AttachmentRecord] {
        try Row.fetchAll(
            db, sql: "SELECT \(Self.attachmentColumns) FROM \"sync_attachments\" WHERE \(condition) ORDER BY \(order)"
        ).map(attachment)
    }

    /// The file `hash`, if the store knows it.
    func attachment(_ hash: String) throws -> AttachmentRecord? {
        try Row.fetchOne(
            db, sql: "SELECT \(Self.attachmentColumns) FROM \"sync_attachments\" WHERE \"hash\" = ?", arguments: [hash]
        ).map(attachment)
    }

    /// The files waiting to be uploaded (but those refused for good), in the order they were attached.
    func attachmentsToUpload() throws -> [AttachmentRecord] {
        try attachments(where: "\"pending\" = 1 AND \"failure\" IS NULL", orderBy: "\"sequence\"")
    }

    /// Every file the store knows.
    func allAttachments() throws -> [AttachmentRecord] {
        try attachments(where: "1", orderBy: "\"sequence\"")
    }

    /// The files here that the server holds, least recently used first: those eviction may remove.
    func evictableAttachments() throws -> [AttachmentRecord] {
        try attachments(where: "\"cached\" = 1 AND \"pending\" = 0", orderBy: "\"lastUsed\", \"sequence\"")
    }

    /// The fields that name files, by table.
    func attachmentFields() throws -> [TableName: Set<String>] {
        var fields: [TableName: Set<String>] = [:]
        for row in try Row.fetchAll(db, sql: #"SELECT "tableName", "field" FROM "sync_attachment_fields""#) {
            fields[try TableName(row["tableName"] as String), default: []].insert(row["field"])
        }
        return fields
    }

    /// The fields of `table` that name files, in name order.
    func attachmentFields(of table: TableName) throws -> [String] {
        try String.fetchAll(
            db, sql: #"SELECT "field" FROM "sync_attachment_fields" WHERE "tableName" = ? ORDER BY "field""#,
            arguments: [table.canonical])
    }

    /// The files that rows a pull stored name, not yet fetched ahead, in the order the pulls brought them.
    func filesToFetch(in table: TableName) throws -> [String] {
        try String.fetchAll(
            db, sql: #"SELECT "hash" FROM "sync_prefetch" WHERE "tableName" = ? ORDER BY "sequence""#,
            arguments: [table.canonical])
    }

    /// The files that rows name in their attachment fields, and those that operations sent before (frozen) name:
    /// the files the store keeps.
    func namedAttachments() throws -> Set<String> {
        var named: Set<String> = []
        let fields = try attachmentFields()
        for (table, columns) in fields where try hasRowTable(table) {
            for field in columns {
                let path = "$.\"" + field.replacingOccurrences(of: "\"", with: "") + "\""
                let values = try String.fetchAll(
                    db,
                    sql: "SELECT DISTINCT json_extract(\"data\", ?) FROM \(SQLiteLocalStore.rowTable(table)) "
                        + "WHERE json_extract(\"data\", ?) IS NOT NULL", arguments: [path, path])
                named.formUnion(values)
            }
        }
        for operation in try operations(after: nil, limit: nil) where operation.kind != .delete {
            guard let item = operation.attempt?.item else { continue }
            for field in fields[operation.table] ?? [] {
                if let hash = item[field]?.stringValue { named.insert(hash) }
            }
        }
        return named
    }
}

extension LocalStoreWriter {
    /// Saves a file's record.
    func saveAttachment(_ record: AttachmentRecord) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO "sync_attachments"
                ("hash", "tableName", "size", "pending", "cached", "sequence", "lastUsed", "failure")
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                record.hash, record.table.canonical, record.size, record.pending, record.cached, record.sequence,
                record.lastUsed, record.failure,
            ])
    }

    /// The next attachment's sequence.
    func nextAttachmentSequence() throws -> Int64 {
        (try Int64.fetchOne(db, sql: #"SELECT max("sequence") FROM "sync_attachments""#) ?? 0) + 1
    }

    /// Forgets a file.
    func removeAttachment(_ hash: String) throws {
        try db.execute(sql: #"DELETE FROM "sync_attachments" WHERE "hash" = ?"#, arguments: [hash])
    }

    /// Records files that rows a pull stored name, to be fetched ahead (``LocalStoreReader/filesToFetch(in:)``).
    func noteFilesToFetch(_ hashes: some Sequence<String>, in table: TableName) throws {
        for hash in hashes {
            try db.execute(
                sql: #"INSERT OR IGNORE INTO "sync_prefetch" ("tableName", "hash") VALUES (?, ?)"#,
                arguments: [table.canonical, hash])
        }
    }

    /// Records the files every row of `table` names in its attachment fields, to be fetched ahead: the rows stored
    /// before the table fetched ahead (``AttachmentTransfers/prefetchAttachments(in:)``, once per table).
    func noteAllFilesToFetch(in table: TableName) throws {
        guard try hasRowTable(table) else { return }
        for field in try attachmentFields(of: table) {
            let path = "$.\"" + field.replacingOccurrences(of: "\"", with: "") + "\""
            try db.execute(
                sql: #"INSERT OR IGNORE INTO "sync_prefetch" ("tableName", "hash") "#
                    + #"SELECT ?, json_extract("data", ?) FROM "# + SQLiteLocalStore.rowTable(table)
                    + #" WHERE json_extract("data", ?) IS NOT NULL"#,
                arguments: [table.canonical, path, path])
        }
    }

    /// Forgets files to fetch ahead: `hashes`, or all of the table's when nil.
    func forgetFilesToFetch(_ hashes: [String]?, in table: TableName) throws {
        guard let hashes else {
            try db.execute(sql: #"DELETE FROM "sync_prefetch" WHERE "tableName" = ?"#, arguments: [table.canonical])
            return
        }
        for hash in hashes {
            try db.execute(
                sql: #"DELETE FROM "sync_prefetch" WHERE "tableName" = ? AND "hash" = ?"#,
                arguments: [table.canonical, hash])
        }
    }

    /// Records that `field` of `table` names files.
    func addAttachmentField(_ field: String, in table: TableName) throws {
        try db.execute(
            sql: #"INSERT OR IGNORE INTO "sync_attachment_fields" ("tableName", "field") VALUES (?, ?)"#,
            arguments: [table.canonical, field])
    }
}
