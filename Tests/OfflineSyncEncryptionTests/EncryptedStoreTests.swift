import Crypto
import Foundation
import GRDB
import OfflineSyncTesting
import SyncCore
import Testing

@testable import OfflineSync
@testable import OfflineSyncEncryption

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The encrypted store (issue 48): nothing readable in its files, the same rows back with the key, a wrong key and a
/// changed page each a typed error, never wrong rows.
@Suite(.timeLimit(.minutes(3))) struct EncryptedStoreTests {
    static let canary = "CANARY-7f3a9c"
    static let url = URL(fileURLWithPath: "/")  // never reached: these tests write locally only

    /// The folder of this test process's folders, removed when the process exits. A test cannot remove its own: its
    /// clients keep their stores open until they go, after the test returns. (Each folder was left behind before:
    /// 864 of them in one machine's temporary directory.)
    static let folders: URL = {
        let folders = FileManager.default.temporaryDirectory.appendingPathComponent(
            "offlinesync-encryption-tests-\(UUID().uuidString)")
        atexit { try? FileManager.default.removeItem(at: EncryptedStoreTests.folders) }
        return folders
    }()

    /// A fresh folder for one test's store (in ``folders``).
    static func folder() throws -> URL {
        let folder = folders.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static var key: StoreKey { get throws { try StoreKey.raw([UInt8](repeating: 7, count: 32)) } }

    /// Writes `count` rows with the canary and a queue of changes (inserts, updates, a delete). Returns the client,
    /// whose store stays open (its WAL in place) while the caller holds it.
    @discardableResult
    static func fill(_ path: String, key: StoreKey, count: Int = 200) async throws -> SyncClient {
        let store = try SQLiteLocalStore.encrypted(path: path, key: key)
        let client = SyncClient(url: url, store: store)
        let table = try client.syncTable("TodoItem")
        for index in 0..<count {
            try await table.insert(["id": .string("item-\(index)"), "text": .string("\(canary) \(index)")])
        }
        try await table.update(["id": "item-1", "text": .string("\(canary) changed")])
        try await table.delete(["id": "item-2"])
        return client
    }

    /// Checks that no file in `folder` holds the canary, SQLite's header or a table's name.
    static func expectNothingReadable(in folder: URL) throws {
        for (name, bytes) in try files(in: folder) {
            #expect(bytes.range(of: Data(canary.utf8)) == nil, "\(name) holds the canary")
            #expect(bytes.range(of: Data("SQLite format 3".utf8)) == nil, "\(name) holds SQLite's header")
            #expect(bytes.range(of: Data("TodoItem".utf8)) == nil, "\(name) holds a table's name")
        }
    }

    /// Every byte of every file in the folder, with its name.
    static func files(in folder: URL) throws -> [(String, Data)] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().compactMap { name in
            FileManager.default.contents(atPath: folder.appendingPathComponent(name).path).map { (name, $0) }
        }
    }

    @Test func noFileHoldsTheCanaryOrSQLitesHeaderAndTheKeyReadsItAllBack() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        // While the store is open, its WAL holds the latest pages; once closed, they are in the database.
        do {
            let writer = try await Self.fill(path, key: try Self.key)
            let open = try Self.files(in: folder)
            #expect(open.contains { $0.0 == "store.sqlite-wal" && !$0.1.isEmpty }, "the scan saw no WAL")
            try Self.expectNothingReadable(in: folder)
            withExtendedLifetime(writer) {}
        }
        // A conflict: the server's row (with the canary) parked beside the refused change.
        do {
            let server: JSONValue = [
                "id": "item-3", "text": .string("\(Self.canary) theirs"), "version": "v9",
                "updatedAt": "2026-11-28T00:00:00.000Z",
            ]
            var configuration = SyncClient.Configuration()
            configuration.transport = ScriptedTransport([.status(409, json: server)])
            let client = SyncClient(
                url: try #require(URL(string: "http://127.0.0.1:9")),
                store: try SQLiteLocalStore.encrypted(path: path, key: try Self.key),
                configuration: configuration)
            try await client.syncTable("TodoItem").update(["id": "item-3", "text": .string("\(Self.canary) mine")])
            let operations = try await client.pendingOperations().filter { $0.itemID.rawValue == "item-3" }
            #expect(operations.count == 1)
            await #expect(throws: PushError.self) { try await client.push() }
            #expect(try await client.operationErrors().map(\.serverItem?["text"]) == [.string("\(Self.canary) theirs")])
            try Self.expectNothingReadable(in: folder)
        }
        let files = try Self.files(in: folder)
        #expect(files.map(\.0).contains("store.sqlite"))
        #expect(files.map(\.0).contains("store.sqlite-key"))
        try Self.expectNothingReadable(in: folder)
        let store = try SQLiteLocalStore.encrypted(path: path, key: try Self.key)
        let client = SyncClient(url: Self.url, store: store)
        let rows = try await client.syncTable("TodoItem").items()
        #expect(rows.count == 199)
        #expect(rows.contains { $0["text"] == .string("\(Self.canary) changed") })
        #expect(try await client.pendingOperations().count == 199)
        #expect(try await client.operationErrors().count == 1)
    }

    /// A crash leaves commits in the WAL, not yet in the database: the next open recovers them from the log. The
    /// store's files are copied while it is open (as a killed process leaves them, with no WAL index), and the copy
    /// must hold every row. Before the cipher zeroed a page's reserved bytes when reading it, SQLite's frame checksums
    /// (computed over the whole page, nonce and tag of the previous read included) failed at the first frame: the
    /// copy opened with none of the rows. `sync-chaos --encrypted` found it (a frozen push lost with a killed sync).
    @Test func commitsInTheWALSurviveACrash() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        let copy = try Self.folder().appendingPathComponent("copy.sqlite").path
        do {
            let writer = try await Self.fill(path, key: try Self.key, count: 20)
            let wal = try Self.files(in: folder).first { $0.0 == "store.sqlite-wal" }?.1
            #expect(wal.map { !$0.isEmpty } == true, "the commits are not in a WAL")
            for suffix in ["", "-wal", "-key"] {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
            }
            withExtendedLifetime(writer) {}
        }
        let client = SyncClient(url: Self.url, store: try SQLiteLocalStore.encrypted(path: copy, key: try Self.key))
        #expect(try await client.syncTable("TodoItem").items().count == 19)
        #expect(try await client.pendingOperations().count == 19)
    }

    /// Sign-out's erase on an encrypted store (its `VACUUM` rebuilds the file through the cipher, its temporary
    /// database in memory): nothing readable in any file, and the key opens an empty store that takes new rows.
    @Test func signOutLeavesAnEmptyEncryptedStore() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        do {
            let client = try await Self.fill(path, key: try Self.key, count: 50)
            try await client.signOut(pending: .discard)
            try Self.expectNothingReadable(in: folder)
        }
        try Self.expectNothingReadable(in: folder)
        let client = SyncClient(url: Self.url, store: try SQLiteLocalStore.encrypted(path: path, key: try Self.key))
        let table = try client.syncTable("TodoItem")
        #expect(try await table.items().isEmpty)
        #expect(try await client.pendingOperations().isEmpty)
        try await table.insert(["id": "after", "text": "new"])
        #expect(try await table.items().count == 1)
    }

    @Test func aWrongKeyIsATypedErrorAndChangesNothing() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        try await Self.fill(path, key: try Self.key, count: 3)
        let before = try Self.files(in: folder).map(\.1)
        let other = try StoreKey.raw([UInt8](repeating: 8, count: 32))
        #expect(throws: StoreEncryptionError.wrongKey(path: try EncryptedStoreFiles.fullPath(path))) {
            try SQLiteLocalStore.encrypted(path: path, key: other)
        }
        #expect(try Self.files(in: folder).map(\.1) == before)
    }

    /// A passphrase against a store made with a raw key, and the reverse: before, the passphrase was stretched with
    /// the raw key's header (no rounds) and failed inside scrypt with an unexplained CoreCrypto error.
    @Test func theOtherKindOfKeyIsAWrongKey() async throws {
        let folder = try Self.folder()
        let raw = folder.appendingPathComponent("raw.sqlite").path
        let phrase = folder.appendingPathComponent("phrase.sqlite").path
        try await Self.fill(raw, key: try Self.key, count: 3)
        try await Self.fill(phrase, key: try StoreKey.passphrase("correct horse"), count: 3)
        #expect(throws: StoreEncryptionError.wrongKey(path: try EncryptedStoreFiles.fullPath(raw))) {
            try SQLiteLocalStore.encrypted(path: raw, key: try StoreKey.passphrase("correct horse"))
        }
        #expect(throws: StoreEncryptionError.wrongKey(path: try EncryptedStoreFiles.fullPath(phrase))) {
            try SQLiteLocalStore.encrypted(path: phrase, key: try Self.key)
        }
    }

    /// Temporary tables, sorts and statement journals stay in memory on every connection: SQLite opens their files
    /// with no name, so the VFS cannot tell whose they are, and on disk they would hold rows in the clear.
    @Test func temporaryFilesStayInMemory() async throws {
        let folder = try Self.folder()
        let store = try SQLiteLocalStore.encrypted(
            path: folder.appendingPathComponent("store.sqlite").path, key: try Self.key)
        let written = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") }
        let read = try await store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") }
        #expect(written == 2 && read == 2)  // 2: MEMORY
    }

    /// An encrypted store opened as a plain one: the error says it is encrypted (before: "file is not a database").
    @Test func anEncryptedStoreOpenedWithoutItsKeySaysSo() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        try await Self.fill(path, key: try Self.key, count: 3)
        // A copy at a path this process never opened with the key (the VFS knows a store by its path).
        let copy = try Self.folder().appendingPathComponent("copy.sqlite").path
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.copyItem(atPath: path + "-key", toPath: copy + "-key")
        let error = #expect(throws: LocalStoreError.self) { try SQLiteLocalStore(path: copy) }
        #expect(error?.description.hasSuffix("it is encrypted: open it with its key (OfflineSyncEncryption)") == true)
    }

    @Test func aPlainStoreOpenedWithAKeyIsATypedError() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("plain.sqlite").path
        let client = SyncClient(url: Self.url, store: try SQLiteLocalStore(path: path))
        try await client.syncTable("TodoItem").insert(["id": "a", "text": "plain"])
        #expect(throws: StoreEncryptionError.notEncrypted(path: try EncryptedStoreFiles.fullPath(path))) {
            try SQLiteLocalStore.encrypted(path: path, key: try Self.key)
        }
    }

    @Test func aPassphraseOpensTheStoreAndAnotherDoesNot() async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        try await Self.fill(path, key: try StoreKey.passphrase("correct horse"), count: 3)
        let store = try SQLiteLocalStore.encrypted(path: path, key: try StoreKey.passphrase("correct horse"))
        #expect(try await SyncClient(url: Self.url, store: store).syncTable("TodoItem").items().count == 2)
        #expect(throws: StoreEncryptionError.self) {
            try SQLiteLocalStore.encrypted(path: path, key: try StoreKey.passphrase("battery staple"))
        }
    }

    /// One bit flipped in a page of the database, or two pages swapped: a typed error naming the file and the page,
    /// never other rows.
    @Test(arguments: ["flip", "swap"])
    func aChangedDatabasePageIsAnErrorNeverWrongRows(change: String) async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        try await Self.fill(path, key: try Self.key, count: 300)
        // Checkpointed into the database: the WAL is gone once the last connection closes.
        var bytes = try #require(FileManager.default.contents(atPath: path))
        let pages = bytes.count / PageCipher.pageSize
        #expect(pages > 3)
        let size = PageCipher.pageSize
        let target = pages - 1
        if change == "flip" {
            bytes[target * size + 100] ^= 0x01
        } else {
            let a = bytes[(1 * size)..<(2 * size)]
            let b = bytes[(target * size)..<((target + 1) * size)]
            bytes.replaceSubrange((target * size)..<((target + 1) * size), with: a)
            bytes.replaceSubrange((1 * size)..<(2 * size), with: b)
        }
        try bytes.write(to: URL(fileURLWithPath: path))
        do {
            let store = try SQLiteLocalStore.encrypted(path: path, key: try Self.key)
            let rows = try await SyncClient(url: Self.url, store: store).syncTable("TodoItem").items()
            Issue.record("read \(rows.count) rows from a changed store")
        } catch {
            // The open or the read failed with the typed error naming the file and the page (a read after the open:
            // as the store error's underlying error).
            let full = try EncryptedStoreFiles.fullPath(path)
            let failure =
                (error as? StoreEncryptionError) ?? ((error as? LocalStoreError)?.underlying as? StoreEncryptionError)
            guard case .tampered(let file, let page)? = failure else {
                Issue.record("not a tampered page: \(error)")
                return
            }
            #expect(file == full)
            #expect(page == UInt64(change == "flip" ? target + 1 : 2) || page == UInt64(target + 1))
        }
    }

    /// The WAL a crash left, changed before the next open: one bit of a frame's page flipped, two frames' pages
    /// swapped, or the log cut in the middle of a frame. Recovery reads a page that does not authenticate as zeros, so
    /// SQLite's checksum ends the log there (docs/encryption.md): the commits before it are kept, the rest lost — and
    /// every row read is one that was written, with its text.
    @Test(arguments: ["flip", "swap", "truncate"])
    func aChangedWALEndsTheLogThereNeverWrongRows(change: String) async throws {
        let folder = try Self.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        let copy = try Self.folder().appendingPathComponent("copy.sqlite").path
        do {
            let writer = try await Self.fill(path, key: try Self.key, count: 60)
            for suffix in ["", "-wal", "-key"] {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
            }
            withExtendedLifetime(writer) {}
        }
        var wal = try #require(FileManager.default.contents(atPath: copy + "-wal"))
        let frame = EncryptingVFS.frameHeader + PageCipher.pageSize
        let frames = (wal.count - EncryptingVFS.walHeader) / frame
        #expect(frames > 20)
        let target = frames / 2
        let page = { (index: Int) in EncryptingVFS.walHeader + index * frame + EncryptingVFS.frameHeader }
        switch change {
        case "flip": wal[page(target) + 200] ^= 0x04
        case "swap":
            let a = wal[page(target)..<(page(target) + PageCipher.pageSize)]
            let b = wal[page(target + 1)..<(page(target + 1) + PageCipher.pageSize)]
            wal.replaceSubrange(page(target)..<(page(target) + PageCipher.pageSize), with: b)
            wal.replaceSubrange(page(target + 1)..<(page(target + 1) + PageCipher.pageSize), with: a)
        default: wal = wal.prefix(page(target) + 1000)
        }
        try wal.write(to: URL(fileURLWithPath: copy + "-wal"))
        let client = SyncClient(url: Self.url, store: try SQLiteLocalStore.encrypted(path: copy, key: try Self.key))
        let rows = try await client.syncTable("TodoItem").items()
        #expect(rows.count < 59, "the commits after the changed frame are lost")
        for row in rows {
            let id = try #require(row["id"]?.stringValue)
            let index = try #require(Int(id.dropFirst("item-".count)))
            let text = row["text"]?.stringValue
            #expect(text == "\(Self.canary) \(index)" || (index == 1 && text == "\(Self.canary) changed"), "\(row)")
        }
        // What remains is a prefix of the writes (the update and the delete came last): the rows of the first
        // inserts, each with its queued change.
        let ids = Set(rows.compactMap { $0["id"]?.stringValue })
        #expect(ids == Set((0..<ids.count).map { "item-\($0)" }))
        #expect(try await client.pendingOperations().count == rows.count)
    }

    /// The test vectors of docs/encryption.md, computed with Python's `cryptography` and `hashlib` (another
    /// implementation of HKDF, scrypt, HMAC and AES-GCM): master key 00 01 … 1f (raw) or scrypt("correct horse", N =
    /// 2^10, r = 8, p = 1), salt 00 01 … 0f; a database page 1 of bytes `(i × 7) mod 256`, nonce a0 a1 … ab.
    @Test func theFormatMatchesItsTestVectors() throws {
        func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        let salt = Array(UInt8(0)..<16)
        let raw = KeyHeader(derivation: 0, log2Rounds: 0, salt: salt, check: [])
        let pageKey = try #require(try StoreKey.raw(Array(UInt8(0)..<32)).pageKey(raw))
        #expect(
            hex(pageKey.withUnsafeBytes { Array($0) })
                == "b337154c744d4902b863e942d42d0101db840c772393b964350150fc3948c0a8")
        #expect(hex(KeyHeader.check(pageKey)) == "cf5552fea9d0bc6f6d7660d9b3e6417f")
        let scrypt = KeyHeader(derivation: 1, log2Rounds: 10, salt: salt, check: [])
        let phraseKey = try #require(try StoreKey.passphrase("correct horse").pageKey(scrypt))
        #expect(
            hex(phraseKey.withUnsafeBytes { Array($0) })
                == "fdcfef8133ddaccf5ca3dbbccf87d27d8826c644872852297eb6c8950ea83de6")
        #expect(hex(KeyHeader.check(phraseKey)) == "421b48eaa231b7e894fd835950fe7ae8")
        let cipher = PageCipher(key: pageKey)
        let nonce = try AES.GCM.Nonce(data: Array(UInt8(0xA0)..<0xAC))
        let plain = (0..<PageCipher.pageSize).map { UInt8(($0 * 7) % 256) }
        var page = plain
        try page.withUnsafeMutableBytes { try cipher.seal($0, role: .database, position: 1, nonce: nonce) }
        #expect(hex(page.prefix(16)) == "53fad69d9fd9349521767d33e787ab13")
        #expect(hex(page.suffix(16)) == "83eb9dadac911031ae5f1445fcd3c4c5")
        #expect(hex(SHA256.hash(data: page)) == "784ed483d2451c0b875eff2d421a53b696839c3bca47dc5bb4f1d864abe21e3f")
        var frame = plain
        try frame.withUnsafeMutableBytes { try cipher.seal($0, role: .wal, position: 56, nonce: nonce) }
        #expect(hex(frame.suffix(16)) == "09ba69c470c56f5ceb54bdc9dba81464")
    }

    /// Nonces count up from their random start, carrying across bytes, and two ciphers start apart.
    @Test func noncesCountUpAndNeverRepeat() throws {
        let sequence = NonceSequence(start: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFE])
        let nonces = try (0..<3).map { _ in Array(try sequence.next()) }
        #expect(nonces.map { Array($0.suffix(3)) } == [[0, 0xFF, 0xFE], [0, 0xFF, 0xFF], [1, 0, 0]])
        #expect(Array(try NonceSequence().next()) != Array(try NonceSequence().next()))
    }

    @Test func aPageSealsAndOpensOnlyAtItsPlace() throws {
        let cipher = PageCipher(key: .init(data: [UInt8](repeating: 1, count: 32)))
        var page = [UInt8](repeating: 0x41, count: PageCipher.pageSize)
        try page.withUnsafeMutableBytes { try cipher.seal($0, role: .database, position: 3) }
        #expect(!page.prefix(100).allSatisfy { $0 == 0x41 })
        var moved = page
        #expect(throws: (any Error).self) {
            try moved.withUnsafeMutableBytes { try cipher.open($0, role: .database, position: 4) }
        }
        #expect(throws: (any Error).self) {
            try moved.withUnsafeMutableBytes { try cipher.open($0, role: .wal, position: 3) }
        }
        try page.withUnsafeMutableBytes { try cipher.open($0, role: .database, position: 3) }
        #expect(page.prefix(PageCipher.pageSize - PageCipher.reservedBytes).allSatisfy { $0 == 0x41 })
    }
}
