import Foundation
import OfflineSync
import SyncCore
import Testing

@testable import OfflineSyncEncryption

/// Changing a store's key, and turning encryption on and off (issue 48): the rows and queued changes come through
/// whole, nothing readable is left, and a process stopped at any point leaves the old store or the new one, readable
/// with its key.
@Suite(.timeLimit(.minutes(3))) struct StoreReencryptionTests {
    typealias Fixture = EncryptedStoreTests

    static var otherKey: StoreKey { get throws { try StoreKey.raw([UInt8](repeating: 9, count: 32)) } }

    /// A file of 150,000 bytes (three sealed chunks) holding the canary.
    static let file = EncryptedAttachmentTests.canaryBytes(150_000)

    /// A plain store with the canary rows and queued changes (closed on return).
    static func fillPlain(_ path: String, count: Int = 30) async throws {
        let client = SyncClient(url: Fixture.url, store: try SQLiteLocalStore(path: path))
        let table = try client.syncTable("TodoItem")
        for index in 0..<count {
            try await table.insert(["id": .string("item-\(index)"), "text": .string("\(Fixture.canary) \(index)")])
        }
    }

    /// Attaches ``file`` to item-0 of the store (opened with `key`, or plain).
    static func attach(_ path: String, key: StoreKey?) async throws {
        let store = try key.map { try SQLiteLocalStore.encrypted(path: path, key: $0) } ?? SQLiteLocalStore(path: path)
        try await SyncClient(url: Fixture.url, store: store).syncTable("TodoItem")
            .attach(file, to: try ItemID("item-0"), field: "file")
    }

    /// The rows and queued changes of the store, opened with `key` (or plain); and whether item-0's file reads back.
    static func contents(_ path: String, key: StoreKey?) async throws -> (rows: Int, pending: Int, file: Bool) {
        let store = try key.map { try SQLiteLocalStore.encrypted(path: path, key: $0) } ?? SQLiteLocalStore(path: path)
        let client = SyncClient(url: Fixture.url, store: store)
        let table = try client.syncTable("TodoItem")
        let file = try? await table.data(for: try ItemID("item-0"), field: "file")
        return (try await table.items().count, try await client.pendingOperations().count, file == Self.file)
    }

    @Test func aNewKeyOpensTheStoreAndTheOldOneNoLonger() async throws {
        let folder = try Fixture.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        try await Fixture.fill(path, key: try Fixture.key, count: 30)
        try await Self.attach(path, key: try Fixture.key)
        try SQLiteLocalStore.changeKey(path: path, from: try Fixture.key, to: try Self.otherKey)
        #expect(try await Self.contents(path, key: try Self.otherKey) == (29, 29, true))
        EncryptingVFS.unregister(try EncryptedStoreFiles.fullPath(path))
        #expect(throws: StoreEncryptionError.wrongKey(path: try EncryptedStoreFiles.fullPath(path))) {
            try SQLiteLocalStore.encrypted(path: path, key: try Fixture.key)
        }
        try Fixture.expectNothingReadable(in: folder)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(
            names.allSatisfy {
                [
                    "store.sqlite", "store.sqlite-key", "store.sqlite-wal", "store.sqlite-shm",
                    "store.sqlite.attachments",
                ].contains($0)
            }, "\(names)")
    }

    @Test func encryptionTurnsOnAndOffWithTheRowsWhole() async throws {
        let folder = try Fixture.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        try await Self.fillPlain(path)
        try await Self.attach(path, key: nil)
        try SQLiteLocalStore.encryptInPlace(path: path, key: try Fixture.key)
        try Fixture.expectNothingReadable(in: folder)
        for (name, data) in EncryptedAttachmentTests.allFiles(folder) {
            #expect(data.range(of: Data(Fixture.canary.utf8)) == nil, "\(name) holds the canary")
        }
        #expect(throws: StoreEncryptionError.alreadyEncrypted(path: try EncryptedStoreFiles.fullPath(path))) {
            try SQLiteLocalStore.encryptInPlace(path: path, key: try Fixture.key)
        }
        #expect(try await Self.contents(path, key: try Fixture.key) == (30, 30, true))
        try SQLiteLocalStore.decryptInPlace(path: path, key: try Fixture.key)
        #expect(!FileManager.default.fileExists(atPath: path + "-key"))
        #expect(try await Self.contents(path, key: nil) == (30, 30, true))
    }

    @Test func aStoreInUseIsNotReplaced() async throws {
        let folder = try Fixture.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        let open = try await Fixture.fill(path, key: try Fixture.key, count: 3)
        #expect(throws: StoreEncryptionError.inUse(path: try EncryptedStoreFiles.fullPath(path))) {
            try SQLiteLocalStore.changeKey(path: path, from: try Fixture.key, to: try Self.otherKey)
        }
        withExtendedLifetime(open) {}
        #expect(try await Self.contents(path, key: try Fixture.key) == (2, 2, false))
    }

    /// Each change stopped after each of its steps, as a killed process would leave it (the files as they are, this
    /// process's VFS forgetting the store as a new process would): the next open finishes or undoes it — before the
    /// copy is committed the old store stands, from then on the new one — with every row and queued change, and no
    /// folder of the change is left.
    @Test(arguments: ["rekey", "encrypt", "decrypt"], StoreReencryption.Step.allCases)
    func aChangeStoppedAtAnyStepLeavesTheOldStoreOrTheNew(change: String, step: StoreReencryption.Step) async throws {
        let folder = try Fixture.folder()
        let path = folder.appendingPathComponent("store.sqlite").path
        let (old, new): (StoreKey?, StoreKey?) =
            switch change {
            case "rekey": (try Fixture.key, try Self.otherKey)
            case "encrypt": (nil, try Fixture.key)
            default: (try Fixture.key, nil)
            }
        if let old { try await Fixture.fill(path, key: old, count: 30) } else { try await Self.fillPlain(path) }
        try await Self.attach(path, key: old)
        let expected = old == nil ? (30, 30, true) : (29, 29, true)
        #expect(throws: StoreReencryption.Stopped.self) {
            try StoreReencryption.run(path: path, from: old, to: new, stopAfter: step)
        }
        let database = try EncryptedStoreFiles.fullPath(path)
        EncryptingVFS.unregister(database)
        let standing = [.copyStarted, .copied].contains(step) ? old : new
        #expect(try await Self.contents(path, key: standing) == expected)
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.contains("-replace") }
        #expect(left.isEmpty)
        #expect(FileManager.default.fileExists(atPath: path + "-key") == (standing != nil))
    }
}
