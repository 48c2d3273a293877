import Foundation
import OfflineSync
import SyncCore
import Testing

@testable import OfflineSyncEncryption

/// Attachment files in an encrypted store (issue 48): sealed in chunks, nothing of them readable in the store's
/// folder, read back whole with the key, and any change to them an error, never other bytes.
@Suite(.timeLimit(.minutes(3))) struct EncryptedAttachmentTests {
    typealias Fixture = EncryptedStoreTests
    static var photo: ItemID { get throws { try ItemID("photo") } }
    static var other: ItemID { get throws { try ItemID("other") } }

    /// An encrypted store with one item, and a client on it.
    static func client(_ folder: URL) async throws -> (SyncClient, SyncTable<JSONValue>) {
        let store = try SQLiteLocalStore.encrypted(
            path: folder.appendingPathComponent("store.sqlite").path, key: try Fixture.key)
        let client = SyncClient(url: Fixture.url, store: store)
        let table = try client.syncTable("TodoItem")
        try await table.insert(["id": "photo", "text": "with a file"])
        return (client, table)
    }

    /// Bytes that hold the canary again and again: `size` of them.
    static func canaryBytes(_ size: Int) -> Data {
        var data = Data()
        while data.count < size { data += Data("\(Fixture.canary) \(data.count) ".utf8) }
        return data.prefix(size)
    }

    /// Every file under `folder`, however deep, with its bytes.
    static func allFiles(_ folder: URL) -> [(String, Data)] {
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        var files: [(String, Data)] = []
        while let name = enumerator?.nextObject() as? String {
            if let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) {
                files.append((name, data))
            }
        }
        return files
    }

    /// Sizes around the 64 KiB chunk: empty, short, one chunk exactly, one byte over, several chunks.
    @Test(arguments: [0, 1000, 65_536, 65_537, 200_000])
    func anAttachedFileIsSealedAndReadsBackWhole(size: Int) async throws {
        let folder = try Fixture.folder()
        let (client, table) = try await Self.client(folder)
        let bytes = Self.canaryBytes(size)
        let source = folder.appendingPathComponent("source.bin")
        try bytes.write(to: source)
        let attachment = try await table.attach(contentsOf: source, to: try Self.photo, field: "file")
        try FileManager.default.removeItem(at: source)
        #expect(attachment.size == size)
        for (name, data) in Self.allFiles(folder) {
            #expect(data.range(of: Data(Fixture.canary.utf8)) == nil, "\(name) holds the canary")
        }
        #expect(try await table.data(for: try Self.photo, field: "file") == bytes)
        let out = folder.appendingPathComponent("out.bin")
        #expect(try await table.writeFile(for: try Self.photo, field: "file", to: out))
        #expect(FileManager.default.contents(atPath: out.path) == bytes)
        await #expect(throws: AttachmentError.self) { try await table.file(for: try Self.photo, field: "file") }
        withExtendedLifetime(client) {}
    }

    /// A byte changed, a chunk dropped from the end, another attachment's file under this one's name: each read is
    /// an AttachmentError (corrupt), never other bytes.
    @Test(arguments: ["flip", "cut", "swap"])
    func aChangedFileIsAnErrorNeverOtherBytes(change: String) async throws {
        let folder = try Fixture.folder()
        let (client, table) = try await Self.client(folder)
        try await table.insert(["id": "other", "text": "another"])
        let mine = try await table.attach(Self.canaryBytes(150_000), to: try Self.photo, field: "file")
        let other = try await table.attach(Self.canaryBytes(150_001), to: try Self.other, field: "file")
        let files = folder.appendingPathComponent("store.sqlite.attachments")
        let path = files.appendingPathComponent(mine.hash).path
        var sealed = try #require(FileManager.default.contents(atPath: path))
        switch change {
        case "flip": sealed[100_000] ^= 0x10
        case "cut": sealed = sealed.prefix(32 + 2 * (65_536 + 28))  // the header and two whole chunks
        default:
            sealed = try #require(FileManager.default.contents(atPath: files.appendingPathComponent(other.hash).path))
        }
        try sealed.write(to: URL(fileURLWithPath: path))
        let error = await #expect(throws: AttachmentError.self) {
            try await table.data(for: try Self.photo, field: "file")
        }
        #expect(error?.code == .corrupt)
        withExtendedLifetime(client) {}
    }
}
