import Crypto
import Foundation
import NIOCore

/// The name of a file rows refer to: the SHA-256 of its bytes, as 64 lowercase hex digits (docs/attachments.md).
struct AttachmentHash: Hashable, Sendable, CustomStringConvertible {
    let hex: String

    /// The hash `text` spells, or nil when it is not 64 lowercase hex digits.
    init?(_ text: String) {
        guard text.utf8.count == 64, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        hex = text
    }

    /// The hash of a finished digest.
    init(_ digest: SHA256.Digest) {
        hex = digest.map { String(format: "%02x", $0) }.joined()
    }

    var description: String { hex }
}

/// What a part of an upload brought.
enum UploadOutcome: Sendable, Hashable {
    /// The upload holds this many bytes; more are to come.
    case partial(received: Int)
    /// The file is complete, checked and stored (`stored`: it was not held before).
    case complete(size: Int, stored: Bool)
}

/// Why an upload's part was not taken.
enum UploadRefusal: Error, Sendable, Hashable {
    /// The part does not begin where the upload ends (`received` bytes).
    case wrongOffset(received: Int)
    /// Another request is adding to the same upload now.
    case busy(received: Int)
    /// The bytes do not hash to the name: the upload is dropped.
    case hashMismatch(actual: AttachmentHash)
    /// The part goes past the declared size, or the body ended before it said it would.
    case sizeMismatch(received: Int)
}

/// What a collection removed.
struct CollectionCount: Sendable, Hashable {
    var files = 0
    var bytes = 0
    var uploads = 0
}

/// Where the server keeps attachments: the files rows name, each stored once by its hash, and the uploads under way,
/// one per uploader and file (so that no caller learns whether another holds a file, and two callers sending the
/// same file do not mix their bytes). ``FileAttachmentStore`` keeps them on the filesystem beside SQLite,
/// ``PostgresAttachmentStore`` in the database every instance shares.
protocol AttachmentStore: Sendable {
    /// The size of the stored file `hash`, or nil when the store does not hold it.
    func size(of hash: AttachmentHash) async throws -> Int?

    /// Whether `uploader` uploaded the stored file `hash`.
    func isUploader(_ uploader: String, of hash: AttachmentHash) async throws -> Bool

    /// How many bytes of `hash` `uploader`'s unfinished upload holds (0 when there is none).
    func received(_ hash: AttachmentHash, by uploader: String) async throws -> Int
    /// `uploader`'s unfinished uploads: the bytes each holds, by file.
    func unfinished(by uploader: String) async throws -> [AttachmentHash: Int]

    /// Adds the bytes of `body`, from `offset`, to `uploader`'s upload of `hash`, which is `total` bytes in all (nil:
    /// the body is the whole file, however long). The bytes that arrive are kept as they come, so that a part cut
    /// short is resumed where it stopped. When the upload is complete, its bytes are hashed: the file is stored (once;
    /// a file already held is kept as it was) and `uploader` recorded as its uploader, or, when they do not match
    /// `hash`, the upload is dropped.
    ///
    /// - Throws: ``UploadRefusal``; `restart` begins the upload anew (a body that is the whole file).
    func receive<Body: AsyncSequence & Sendable>(
        _ hash: AttachmentHash, by uploader: String, offset: Int, total: Int?, restart: Bool, body: Body
    ) async throws -> UploadOutcome where Body.Element == ByteBuffer

    /// Gives the bytes `range` of the stored file `hash` to `write`, in pieces of at most 256 KiB.
    func read(
        _ hash: AttachmentHash, range: Range<Int>, into write: (ByteBuffer) async throws -> Void
    ) async throws

    /// Marks the file as just named by a row (so that no collection takes it in the grace period); false when the
    /// store does not hold it.
    func touch(_ hash: AttachmentHash) async throws -> Bool

    /// Removes the files last touched before `cutoff` that `isNamed` says no row names, and the uploads last added to
    /// before it.
    func collect(before cutoff: Date, isNamed: @Sendable (AttachmentHash) async throws -> Bool) async throws
        -> CollectionCount
}

extension AttachmentStore {
    /// The key of `uploader`'s uploads: a digest, so that any subject is a safe file or key name.
    static func uploaderKey(_ uploader: String) -> String {
        String(AttachmentHash(SHA256.hash(data: Data(uploader.utf8))).hex.prefix(32))
    }
}

/// The most bytes of one piece a store keeps or reads at once.
let attachmentPieceSize = 256 * 1024
