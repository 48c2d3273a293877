import Crypto
import Foundation

/// The authenticated encryption of one unit of a store's files (docs/encryption.md): a database page, the page a WAL
/// frame carries, or a page a rollback journal saves. A unit of `size` bytes holds `size - 28` bytes of ciphertext,
/// then the 12-byte nonce and the 16-byte tag of AES-256-GCM in the 28 bytes SQLite reserves at the end of each page.
/// The associated data binds the unit to its place: the file's role and the unit's position in that file.
struct PageCipher: Sendable {
    /// The bytes at the end of each page that SQLite leaves to the cipher: nonce and tag.
    static let reservedBytes = 28
    /// The page size of every encrypted store.
    static let pageSize = 4096

    /// Which file of a store a unit belongs to (a byte of the associated data).
    enum Role: UInt8, Sendable {
        case database = 1
        case wal = 2
        case journal = 3
    }

    let key: SymmetricKey
    /// Where each seal's nonce comes from: a random 96-bit start, counted up (one random draw per cipher, not per
    /// page: a system call each time cost about a sixth of a seal).
    let nonces = NonceSequence()

    /// The key that seals the store's attachment files: HKDF-SHA256(page key, info "OfflineSync attachment key v1").
    var attachmentKey: [UInt8] {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key, info: Array("OfflineSync attachment key v1".utf8), outputByteCount: 32
        ).withUnsafeBytes { Array($0) }
    }

    /// The associated data of a unit: "OSE1", the role, and the position (page number or file offset), big-endian.
    static func associatedData(_ role: Role, _ position: UInt64) -> [UInt8] {
        var bytes: [UInt8] = Array("OSE1".utf8)
        bytes.append(role.rawValue)
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: position >> UInt64(shift)))
        }
        return bytes
    }

    /// Encrypts the unit in `page` in place: its first `count - 28` bytes become ciphertext, the last 28 the nonce
    /// and tag. A fresh nonce each time, never one used before under this key (`nonce`: the test vectors' fixed one).
    func seal(
        _ page: UnsafeMutableRawBufferPointer, role: Role, position: UInt64, nonce fixed: AES.GCM.Nonce? = nil
    ) throws {
        let body = page.count - Self.reservedBytes
        guard body > 0 else { throw PageCipherError.unitTooSmall }
        let nonce = try fixed ?? nonces.next()
        let sealed = try AES.GCM.seal(
            UnsafeRawBufferPointer(rebasing: page[0..<body]), using: key, nonce: nonce,
            authenticating: Self.associatedData(role, position))
        sealed.ciphertext.withUnsafeBytes {
            UnsafeMutableRawBufferPointer(rebasing: page[0..<body]).copyMemory(from: $0)
        }
        sealed.nonce.withUnsafeBytes {
            UnsafeMutableRawBufferPointer(rebasing: page[body..<(body + 12)]).copyMemory(from: $0)
        }
        sealed.tag.withUnsafeBytes {
            UnsafeMutableRawBufferPointer(rebasing: page[(body + 12)...]).copyMemory(from: $0)
        }
    }

    /// Decrypts the unit in `page` in place, its reserved bytes zeroed: SQLite reads them back as it wrote them
    /// (zeros: a page's reserved bytes are never written by SQLite), so a WAL frame's checksum, computed over the whole
    /// page, still holds when the log is recovered after a crash — with the nonce and tag left there, recovery stopped
    /// at the first frame and every commit not yet checkpointed was lost. Throws when it does not authenticate:
    /// another key, a changed byte, or a unit from another place.
    func open(_ page: UnsafeMutableRawBufferPointer, role: Role, position: UInt64) throws {
        let body = page.count - Self.reservedBytes
        guard body > 0 else { throw PageCipherError.unitTooSmall }
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: UnsafeRawBufferPointer(rebasing: page[body..<(body + 12)])),
            ciphertext: UnsafeRawBufferPointer(rebasing: page[0..<body]),
            tag: UnsafeRawBufferPointer(rebasing: page[(body + 12)...]))
        let plain = try AES.GCM.open(box, using: key, authenticating: Self.associatedData(role, position))
        plain.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: page[0..<body]).copyMemory(from: $0) }
        UnsafeMutableRawBufferPointer(rebasing: page[body...]).initializeMemory(as: UInt8.self, repeating: 0)
    }
}

/// A unit smaller than its nonce and tag.
enum PageCipherError: Error {
    case unitTooSmall
}

/// The nonces of one cipher: 12 bytes drawn at random once, then counted up by one per seal (as a 96-bit big-endian
/// number). Unique under the key as long as two ciphers' runs never meet: with random starts in 2^96, two processes
/// that each seal 2^40 pages meet with a chance below 2^-55.
final class NonceSequence: @unchecked Sendable {  // @unchecked: `next` behind `lock`.
    private let lock = NSLock()
    private var bytes: [UInt8]

    /// A sequence from a random start (`start`: a test's).
    init(start: [UInt8]? = nil) {
        bytes = start ?? Array(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }.prefix(12))
    }

    /// The next nonce.
    func next() throws -> AES.GCM.Nonce {
        let current = lock.withLock { () -> [UInt8] in
            let current = bytes
            for index in bytes.indices.reversed() {
                bytes[index] &+= 1
                if bytes[index] != 0 { break }
            }
            return current
        }
        return try AES.GCM.Nonce(data: current)
    }
}
