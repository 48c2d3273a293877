import Crypto
import CryptoExtras
import Foundation
public import OfflineSync

/// The app's key to an encrypted store (docs/encryption.md): 32 random bytes the app keeps (on Apple platforms, in the
/// Keychain), or a passphrase stretched by scrypt with the store's own salt.
public struct StoreKey: Sendable {
    enum Source: Sendable {
        case raw([UInt8])
        case passphrase(String)
    }

    let source: Source

    /// A raw key of 32 bytes.
    ///
    /// - Parameter bytes: The key.
    /// - Throws: ``StoreEncryptionError/invalidKey(_:)`` when it is not 32 bytes long.
    public static func raw(_ bytes: some Collection<UInt8>) throws -> StoreKey {
        guard bytes.count == 32 else {
            throw StoreEncryptionError.invalidKey("a raw key is 32 bytes, not \(bytes.count)")
        }
        return StoreKey(source: .raw(Array(bytes)))
    }

    /// A passphrase: the store's key is derived from it with scrypt (N = 2^15, r = 8, p = 1) and the store's salt,
    /// about 0.1 s and 32 MB each time a store is opened.
    ///
    /// - Parameter text: The passphrase (its UTF-8 bytes).
    /// - Throws: ``StoreEncryptionError/invalidKey(_:)`` when it is empty.
    public static func passphrase(_ text: String) throws -> StoreKey {
        guard !text.utf8.isEmpty else { throw StoreEncryptionError.invalidKey("the passphrase is empty") }
        return StoreKey(source: .passphrase(text))
    }

    /// The key that encrypts the store's pages, from this key and the store's header; nil when the header was made
    /// for the other kind of key (a raw key against a passphrase's store, or the reverse): a wrong key.
    func pageKey(_ header: KeyHeader) throws -> SymmetricKey? {
        let master: SymmetricKey
        switch (source, header.derivation) {
        case (.raw(let bytes), 0):
            master = SymmetricKey(data: bytes)
        case (.passphrase(let text), 1):
            master = try KDF.Scrypt.deriveKey(
                from: Array(text.utf8), salt: header.salt, outputByteCount: 32, rounds: 1 << Int(header.log2Rounds),
                blockSize: 8, parallelism: 1)
        default:
            return nil
        }
        return HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master, salt: header.salt, info: Array("OfflineSync page key v1".utf8),
            outputByteCount: 32)
    }
}

/// The store's key header, the file beside the database named `<database>-key` (64 bytes): `OSYNCKEY`, the format
/// version (1), how the key is derived (0: raw, 1: scrypt), scrypt's log2 N, three zero bytes, the store's 16-byte
/// salt, a 16-byte zero pad, the 16-byte key check (the first bytes of HMAC-SHA256(page key, "key check")) and two zero
/// bytes.
struct KeyHeader: Sendable, Equatable {
    static let magic = Array("OSYNCKEY".utf8)
    static let size = 64

    var derivation: UInt8
    var log2Rounds: UInt8
    var salt: [UInt8]
    var check: [UInt8]

    /// A new header for `key`, with a fresh salt.
    static func new(for key: StoreKey) throws -> (KeyHeader, SymmetricKey) {
        var header = KeyHeader(
            derivation: 0, log2Rounds: 0, salt: Array(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }),
            check: [])
        if case .passphrase = key.source { (header.derivation, header.log2Rounds) = (1, 15) }
        guard let pageKey = try key.pageKey(header) else { throw StoreEncryptionError.invalidKey("no derivation") }
        header.check = Self.check(pageKey)
        return (header, pageKey)
    }

    static func check(_ pageKey: SymmetricKey) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array("key check".utf8), using: pageKey)).prefix(16).map { $0 }
    }

    var bytes: [UInt8] {
        var bytes = Self.magic
        bytes += [1, derivation, log2Rounds, 0, 0, 0]
        bytes += salt
        bytes += [UInt8](repeating: 0, count: 16)
        bytes += check
        bytes += [0, 0]
        return bytes
    }

    init(derivation: UInt8, log2Rounds: UInt8, salt: [UInt8], check: [UInt8]) {
        self.derivation = derivation
        self.log2Rounds = log2Rounds
        self.salt = salt
        self.check = check
    }

    /// Reads a header; nil when `bytes` is not one.
    init?(_ bytes: [UInt8]) {
        // Raw: no rounds; scrypt: N from 2^10 to 2^24 (a changed header must not make opening free or endless).
        guard bytes.count == Self.size, Array(bytes[0..<8]) == Self.magic, bytes[8] == 1,
            (bytes[9] == 0 && bytes[10] == 0) || (bytes[9] == 1 && (10...24).contains(bytes[10]))
        else { return nil }
        self.init(
            derivation: bytes[9], log2Rounds: bytes[10], salt: Array(bytes[14..<30]), check: Array(bytes[46..<62]))
    }
}

/// Why an encrypted store could not be opened or read.
public enum StoreEncryptionError: Error, Sendable, Equatable, CustomStringConvertible, DescribedStoreFailure {
    /// The key given is not a valid key.
    case invalidKey(String)
    /// The key does not open this store (it was encrypted with another key). Nothing was read or changed.
    case wrongKey(path: String)
    /// The store at the path is not encrypted, or is encrypted but its key header is missing or damaged.
    case notEncrypted(path: String)
    /// The VFS that encrypts stores could not be installed in SQLite (the reason says why). No store was opened.
    case vfsUnavailable(String)
    /// A page of a store file did not authenticate: changed, moved, or from another file. `file` is the file's path,
    /// `page` the page number in the database (from 1) or the unit's byte offset in a WAL or journal.
    case tampered(file: String, page: UInt64)
    /// The store is encrypted already (encryption cannot be turned on again: change its key instead).
    case alreadyEncrypted(path: String)
    /// A connection has the store open (in this process or another): its files cannot be replaced now.
    case inUse(path: String)

    /// One sentence.
    public var description: String {
        switch self {
        case .invalidKey(let reason): "Invalid store key: \(reason)"
        case .wrongKey(let path): "The key does not open the encrypted store at \(path)"
        case .notEncrypted(let path): "The store at \(path) is not encrypted, or its key file \(path)-key is missing"
        case .vfsUnavailable(let reason): "The encrypting VFS could not be installed: \(reason)"
        case .tampered(let file, let page): "Page \(page) of \(file) did not authenticate: the file was changed"
        case .alreadyEncrypted(let path): "The store at \(path) is encrypted already"
        case .inUse(let path): "The store at \(path) is open: close every client of it first"
        }
    }
}
