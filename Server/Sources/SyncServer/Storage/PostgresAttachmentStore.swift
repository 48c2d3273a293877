import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Attachments in the PostgreSQL database every instance shares: each file's bytes in pieces of at most 1 MiB
/// (`__sync_attachment_pieces`, owned by `f:<sha256>` for a stored file, `u:<uploader>:<sha256>` for an upload), the
/// stored files with their size and when they were last touched, who uploaded each, and when each upload last grew.
///
/// Each piece is its own statement, so that what arrived before a body was cut is kept; two requests adding the same
/// piece (two instances, one upload) meet on its primary key, and one is told the upload is busy. A file is stored
/// by one transaction that hands the upload's pieces to the file. Touching and collecting a file meet on its row:
/// the collection's `DELETE … WHERE touched < cutoff` waits for a touch under way and then sees it.
final class PostgresAttachmentStore: AttachmentStore {
    let store: PostgresTableStore
    let now: @Sendable () -> Date
    private var logger: Logger { store.logger }
    /// The bytes of one piece row.
    static let pieceSize = 1 << 20

    init(store: PostgresTableStore, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.now = now
    }

    /// The bookkeeping migrations that create the tables, one statement each.
    static let migrations: [(name: String, sql: String)] = [
        (
            "attachments",
            #"""
            CREATE TABLE "__sync_attachments" (
                "hash" text COLLATE "C" PRIMARY KEY, "size" bigint NOT NULL, "touched" bigint NOT NULL
            )
            """#
        ),
        ("attachments by touch", #"CREATE INDEX "__sync_attachments_touched" ON "__sync_attachments" ("touched")"#),
        (
            "attachment uploaders",
            #"""
            CREATE TABLE "__sync_attachment_uploaders" (
                "hash" text COLLATE "C" NOT NULL, "uploader" text COLLATE "C" NOT NULL, PRIMARY KEY ("hash", "uploader")
            )
            """#
        ),
        (
            "attachment uploads",
            #"""
            CREATE TABLE "__sync_attachment_uploads" ("owner" text COLLATE "C" PRIMARY KEY, "updated" bigint NOT NULL)
            """#
        ),
        (
            "attachment pieces",
            #"""
            CREATE TABLE "__sync_attachment_pieces" (
                "owner" text COLLATE "C" NOT NULL, "offset" bigint NOT NULL, "data" bytea NOT NULL,
                PRIMARY KEY ("owner", "offset")
            )
            """#
        ),
    ]

    private var stamp: Int64 { Int64((now().timeIntervalSince1970 * 1000).rounded(.down)) }
    private static func fileOwner(_ hash: AttachmentHash) -> String { "f:" + hash.hex }
    private static func uploadOwner(_ hash: AttachmentHash, _ uploader: String) -> String {
        "u:" + uploaderKey(uploader) + ":" + hash.hex
    }

    func size(of hash: AttachmentHash) async throws -> Int? {
        let logger = logger
        return try await store.withConnection { connection in
            let rows = try await connection.query(
                #"SELECT "size" FROM "__sync_attachments" WHERE "hash" = \#(hash.hex)"#, logger: logger)
            for try await size in rows.decode(Int64.self) { return Int(size) }
            return nil
        }
    }

    func isUploader(_ uploader: String, of hash: AttachmentHash) async throws -> Bool {
        let logger = logger
        let key = Self.uploaderKey(uploader)
        return try await store.withConnection { connection in
            let rows = try await connection.query(
                #"SELECT 1 FROM "__sync_attachment_uploaders" WHERE "hash" = \#(hash.hex) AND "uploader" = \#(key)"#,
                logger: logger)
            for try await _ in rows.decode(Int.self) { return true }
            return false
        }
    }

    func received(_ hash: AttachmentHash, by uploader: String) async throws -> Int {
        try await end(of: Self.uploadOwner(hash, uploader))
    }

    func unfinished(by uploader: String) async throws -> [AttachmentHash: Int] {
        let logger = logger
        // The owners of one uploader's uploads share the prefix `u:<key>:`, of hex digits and ':' (no LIKE wildcard).
        let pattern = "u:" + Self.uploaderKey(uploader) + ":%"
        return try await store.withConnection { connection in
            let rows = try await connection.query(
                #"""
                SELECT "u"."owner", coalesce(max("p"."offset" + length("p"."data")), 0)::bigint
                FROM "__sync_attachment_uploads" AS "u" LEFT JOIN "__sync_attachment_pieces" AS "p" ON "p"."owner" = "u"."owner"
                WHERE "u"."owner" LIKE \#(pattern) GROUP BY "u"."owner"
                """#, logger: logger)
            var uploads: [AttachmentHash: Int] = [:]
            for try await (owner, end) in rows.decode((String, Int64).self) {
                guard let hash = AttachmentHash(String(owner.suffix(64))) else { continue }
                uploads[hash] = Int(end)
            }
            return uploads
        }
    }

    /// Where the pieces of `owner` end.
    private func end(of owner: String) async throws -> Int {
        let logger = logger
        return try await store.withConnection { connection in
            let rows = try await connection.query(
                #"""
                SELECT coalesce(max("offset" + length("data")), 0)::bigint FROM "__sync_attachment_pieces"
                WHERE "owner" = \#(owner)
                """#, logger: logger)
            for try await end in rows.decode(Int64.self) { return Int(end) }
            return 0
        }
    }

    func receive<Body: AsyncSequence & Sendable>(
        _ hash: AttachmentHash, by uploader: String, offset: Int, total: Int?, restart: Bool, body: Body
    ) async throws -> UploadOutcome where Body.Element == ByteBuffer {
        let owner = Self.uploadOwner(hash, uploader)
        let (start, holdsAll) = try await begin(owner, restart: restart, offset: offset, total: total)
        let position = try await pieces(of: body, owner: owner, from: start, total: total, dropped: holdsAll)
        if let total, position < total { return .partial(received: position) }
        return try await finish(hash, by: uploader, owner: owner, size: position)
    }

    /// Starts or continues an upload at `offset`: a restart drops what it held first.
    ///
    /// - Returns: Where the upload ends, and whether it holds every byte of a file it did not name (an instance died,
    ///   or the caller gave up, while its hash was checked): any part sent again finishes it, its bytes dropped.
    /// - Throws: ``UploadRefusal/wrongOffset(received:)`` for a part that does not begin where the upload ends.
    private func begin(_ owner: String, restart: Bool, offset: Int, total: Int?) async throws -> (
        start: Int, holdsAll: Bool
    ) {
        let logger = logger
        let updated = stamp
        if restart {
            _ = try await store.transaction { connection in
                try await connection.query(
                    #"DELETE FROM "__sync_attachment_pieces" WHERE "owner" = \#(owner)"#, logger: logger)
            }
        }
        let start = try await end(of: owner)
        let holdsAll = total.map { $0 > 0 && start == $0 && offset < start } ?? false
        guard offset == start || holdsAll else { throw UploadRefusal.wrongOffset(received: start) }
        _ = try await store.withConnection(isWrite: true) { connection in
            try await connection.query(
                #"""
                INSERT INTO "__sync_attachment_uploads" ("owner", "updated") VALUES (\#(owner), \#(updated))
                ON CONFLICT ("owner") DO UPDATE SET "updated" = EXCLUDED."updated"
                """#, logger: logger)
        }
        return (start, holdsAll)
    }

    /// Stores `body` in pieces of ``pieceSize`` bytes from `start` (or reads it to its end, `dropped`). What arrived
    /// before a body was cut is kept, to resume from.
    ///
    /// - Returns: Where the upload ends.
    /// - Throws: ``UploadRefusal/sizeMismatch(received:)`` past `total`; ``UploadRefusal/busy(received:)`` when
    ///   another request stored a piece at the same place first.
    private func pieces<Body: AsyncSequence & Sendable>(
        of body: Body, owner: String, from start: Int, total: Int?, dropped: Bool
    ) async throws -> Int where Body.Element == ByteBuffer {
        let logger = logger
        var position = start
        var piece = ByteBuffer()
        func flush() async throws {
            guard piece.readableBytes > 0 else { return }
            let data = piece
            let at = Int64(position)
            let taken = try await store.withConnection(isWrite: true) { connection in
                let rows = try await connection.query(
                    #"""
                    INSERT INTO "__sync_attachment_pieces" ("owner", "offset", "data") VALUES (\#(owner), \#(at), \#(data))
                    ON CONFLICT DO NOTHING RETURNING 1
                    """#, logger: logger)
                for try await _ in rows.decode(Int.self) { return true }
                return false
            }
            guard taken else { throw UploadRefusal.busy(received: position) }
            position += data.readableBytes
            piece.clear()
        }
        do {
            for try await var buffer in body where !dropped {
                if let total, position + piece.readableBytes + buffer.readableBytes > total {
                    throw UploadRefusal.sizeMismatch(received: position + piece.readableBytes)
                }
                while buffer.readableBytes > 0 {
                    var part = buffer.readSlice(
                        length: min(buffer.readableBytes, Self.pieceSize - piece.readableBytes))!
                    piece.writeBuffer(&part)
                    if piece.readableBytes == Self.pieceSize { try await flush() }
                }
            }
        } catch {
            try? await flush()
            throw error
        }
        try await flush()
        return position
    }

    /// Names a whole upload's file once its bytes hash to `hash`: its pieces become the file's (or go, when the
    /// server holds the file already), and the caller is recorded as one of its uploaders.
    ///
    /// - Throws: ``UploadRefusal/hashMismatch(actual:)`` (the upload is dropped).
    private func finish(_ hash: AttachmentHash, by uploader: String, owner: String, size position: Int) async throws
        -> UploadOutcome
    {
        let logger = logger
        let updated = stamp
        let actual = try await digest(of: owner, size: position)
        guard actual == hash else {
            if try await size(of: hash) != nil, try await isUploader(uploader, of: hash) {
                // Another request completed this upload a moment ago and took its pieces.
                return .complete(size: position, stored: false)
            }
            try await drop(owner)
            throw UploadRefusal.hashMismatch(actual: actual)
        }
        let size = Int64(position)
        let key = Self.uploaderKey(uploader)
        let file = Self.fileOwner(hash)
        let stored = try await store.transaction { connection in
            let rows = try await connection.query(
                #"""
                INSERT INTO "__sync_attachments" ("hash", "size", "touched") VALUES (\#(hash.hex), \#(size), \#(updated))
                ON CONFLICT ("hash") DO UPDATE SET "touched" = EXCLUDED."touched" RETURNING (xmax = 0)
                """#, logger: logger)
            var inserted = false
            for try await value in rows.decode(Bool.self) { inserted = value }
            try await connection.query(
                inserted
                    ? #"UPDATE "__sync_attachment_pieces" SET "owner" = \#(file) WHERE "owner" = \#(owner)"#
                    : #"DELETE FROM "__sync_attachment_pieces" WHERE "owner" = \#(owner)"#, logger: logger)
            try await connection.query(
                #"""
                INSERT INTO "__sync_attachment_uploaders" ("hash", "uploader") VALUES (\#(hash.hex), \#(key))
                ON CONFLICT DO NOTHING
                """#, logger: logger)
            try await connection.query(
                #"DELETE FROM "__sync_attachment_uploads" WHERE "owner" = \#(owner)"#, logger: logger)
            return inserted
        }
        return .complete(size: position, stored: stored)
    }

    /// Removes an upload and its pieces.
    private func drop(_ owner: String) async throws {
        let logger = logger
        try await store.transaction { connection in
            try await connection.query(
                #"DELETE FROM "__sync_attachment_pieces" WHERE "owner" = \#(owner)"#, logger: logger)
            try await connection.query(
                #"DELETE FROM "__sync_attachment_uploads" WHERE "owner" = \#(owner)"#, logger: logger)
        }
    }

    /// The SHA-256 of the pieces of `owner`, read a few at a time.
    private func digest(of owner: String, size: Int) async throws -> AttachmentHash {
        var hasher = SHA256()
        try await pieces(of: owner, range: 0..<size) { buffer in
            buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        }
        return AttachmentHash(hasher.finalize())
    }

    /// Gives the bytes `range` of `owner`'s pieces to `body`: a window of a few pieces per query, each on a connection
    /// held only for that query (a slow reader holds none).
    private func pieces(of owner: String, range: Range<Int>, _ body: (ByteBuffer) async throws -> Void) async throws {
        let logger = logger
        var position = range.lowerBound
        let window = 4 * Self.pieceSize
        while position < range.upperBound {
            let from = Int64(position)
            let to = Int64(min(range.upperBound, position + window))
            let buffers = try await store.withConnection { connection in
                let rows = try await connection.query(
                    #"""
                    SELECT substring("data" FROM (greatest(\#(from) - "offset", 0) + 1)::int
                        FOR (least("offset" + length("data"), \#(to)) - greatest("offset", \#(from)))::int)
                    FROM "__sync_attachment_pieces"
                    WHERE "owner" = \#(owner) AND "offset" < \#(to) AND "offset" + length("data") > \#(from)
                    ORDER BY "offset"
                    """#, logger: logger)
                var buffers: [ByteBuffer] = []
                for try await buffer in rows.decode(ByteBuffer.self) { buffers.append(buffer) }
                return buffers
            }
            let count = buffers.reduce(0) { $0 + $1.readableBytes }
            guard count == Int(to - from) else {
                throw TableStoreError.unavailable("the pieces of \(owner) from \(from) are missing")
            }
            for buffer in buffers { try await body(buffer) }
            position = Int(to)
        }
    }

    func read(
        _ hash: AttachmentHash, range: Range<Int>, into write: (ByteBuffer) async throws -> Void
    ) async throws {
        try await pieces(of: Self.fileOwner(hash), range: range) { buffer in
            var buffer = buffer
            while buffer.readableBytes > 0 {
                try await write(buffer.readSlice(length: min(buffer.readableBytes, attachmentPieceSize))!)
            }
        }
    }

    func touch(_ hash: AttachmentHash) async throws -> Bool {
        let logger = logger
        let touched = stamp
        return try await store.withConnection(isWrite: true) { connection in
            let rows = try await connection.query(
                #"UPDATE "__sync_attachments" SET "touched" = \#(touched) WHERE "hash" = \#(hash.hex) RETURNING 1"#,
                logger: logger)
            for try await _ in rows.decode(Int.self) { return true }
            return false
        }
    }

    func collect(before cutoff: Date, isNamed: @Sendable (AttachmentHash) async throws -> Bool) async throws
        -> CollectionCount
    {
        let logger = logger
        let limit = Int64((cutoff.timeIntervalSince1970 * 1000).rounded(.down))
        var count = CollectionCount()
        let candidates = try await store.withConnection { connection in
            let rows = try await connection.query(
                #"SELECT "hash" FROM "__sync_attachments" WHERE "touched" < \#(limit) ORDER BY "touched" LIMIT 1000"#,
                logger: logger)
            var hashes: [AttachmentHash] = []
            for try await hex in rows.decode(String.self) { AttachmentHash(hex).map { hashes.append($0) } }
            return hashes
        }
        for hash in candidates where try await !isNamed(hash) {
            let file = Self.fileOwner(hash)
            let removed = try await store.transaction { connection in
                let rows = try await connection.query(
                    #"""
                    DELETE FROM "__sync_attachments" WHERE "hash" = \#(hash.hex) AND "touched" < \#(limit)
                    RETURNING "size"
                    """#, logger: logger)
                var size: Int64?
                for try await value in rows.decode(Int64.self) { size = value }
                guard size != nil else { return size }
                try await connection.query(
                    #"DELETE FROM "__sync_attachment_pieces" WHERE "owner" = \#(file)"#, logger: logger)
                try await connection.query(
                    #"DELETE FROM "__sync_attachment_uploaders" WHERE "hash" = \#(hash.hex)"#, logger: logger)
                return size
            }
            if let removed {
                count.files += 1
                count.bytes += Int(removed)
            }
        }
        count.uploads = try await store.transaction { connection in
            let rows = try await connection.query(
                #"DELETE FROM "__sync_attachment_uploads" WHERE "updated" < \#(limit) RETURNING "owner""#,
                logger: logger)
            var owners: [String] = []
            for try await owner in rows.decode(String.self) { owners.append(owner) }
            for owner in owners {
                try await connection.query(
                    #"DELETE FROM "__sync_attachment_pieces" WHERE "owner" = \#(owner)"#, logger: logger)
            }
            return owners.count
        }
        return count
    }
}
