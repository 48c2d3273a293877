import Foundation

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

/// The format of an attachment file in an encrypted store (docs/encryption.md, "Attachment files"): a 32-byte
/// header — `OSYNCAF1`, a random 16-byte file id, 8 zero bytes — then the bytes in chunks of 64 KiB, each sealed with
/// AES-256-GCM as its ciphertext, a fresh 12-byte nonce and the 16-byte tag. The associated data binds each chunk to
/// its file and place: `OSA1`, the file id, the chunk's index (8 bytes, big-endian), and a last byte 1 for the final
/// chunk (which may be empty) followed by the file's SHA-256 — so a chunk moved, dropped or taken from another file,
/// a file cut short, and a whole file put under another's name each fail to open. A download under way (`.part`)
/// has no final chunk yet: its last chunk may be short, and is sealed again as the next bytes come.
struct SealedAttachment: Sendable {
    static let magic = Array("OSYNCAF1".utf8)
    static let headerSize = 32
    static let chunkSize = 65_536
    /// Nonce and tag, after each chunk's ciphertext.
    static let overhead = 28
    static let sealedChunkSize = chunkSize + overhead

    let key: SymmetricKey

    init(key bytes: [UInt8]) { key = SymmetricKey(data: bytes) }

    /// Where chunk `index` starts in the file.
    static func offset(ofChunk index: Int) -> Int { headerSize + index * sealedChunkSize }

    /// The count of chunks (a short last one included) a sealed file of `fileSize` bytes holds.
    static func chunkCount(fileSize: Int) -> Int {
        (max(0, fileSize - headerSize) + sealedChunkSize - 1) / sealedChunkSize
    }

    /// The count of plain bytes a sealed file of `fileSize` bytes holds (its final chunk, if any, included).
    static func plainSize(fileSize: Int) -> Int {
        max(0, max(0, fileSize - headerSize) - chunkCount(fileSize: fileSize) * overhead)
    }

    static func associatedData(fileID: [UInt8], index: Int, finalHash: [UInt8]?) -> [UInt8] {
        var bytes = Array("OSA1".utf8) + fileID
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: index >> shift)) }
        if let finalHash { bytes += [1] + finalHash } else { bytes.append(0) }
        return bytes
    }

    func seal(_ plain: Data, fileID: [UInt8], index: Int, finalHash: [UInt8]?) throws -> Data {
        let box = try AES.GCM.seal(
            plain, using: key, nonce: AES.GCM.Nonce(),
            authenticating: Self.associatedData(fileID: fileID, index: index, finalHash: finalHash))
        return box.ciphertext + Data(box.nonce) + box.tag
    }

    func open(_ sealed: Data, fileID: [UInt8], index: Int, finalHash: [UInt8]?) throws -> Data {
        guard sealed.count >= Self.overhead else { throw SealedAttachmentError() }
        let body = sealed.count - Self.overhead
        let start = sealed.startIndex
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: sealed[(start + body)..<(start + body + 12)]),
            ciphertext: sealed[start..<(start + body)], tag: sealed[(start + body + 12)...])
        return try AES.GCM.open(
            box, using: key, authenticating: Self.associatedData(fileID: fileID, index: index, finalHash: finalHash))
    }

    /// The file id in a sealed file's header.
    static func fileID(_ handle: FileHandle) throws -> [UInt8] {
        try handle.seek(toOffset: 0)
        guard let header = try handle.read(upToCount: headerSize), header.count == headerSize,
            Array(header.prefix(8)) == magic
        else { throw SealedAttachmentError() }
        return Array(header[(header.startIndex + 8)..<(header.startIndex + 24)])
    }

    /// The raw SHA-256 that a file's name (64 hex digits) spells.
    static func hashBytes(_ hash: String) -> [UInt8] {
        let digits = Array(hash.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).compactMap {
            UInt8(String(decoding: digits[$0..<($0 + 2)], as: UTF8.self), radix: 16)
        }
    }
}

/// A sealed file's chunk did not open: changed, moved, cut short, another file's, or another key's.
struct SealedAttachmentError: Error {}

/// Writes a sealed file as bytes come: each full chunk sealed and written at once; ``finish(hash:)`` seals the rest
/// as the final chunk. With `keepsPartial`, the short chunk at the end is written (non-final) after each write too,
/// so a download stopped there resumes from every byte received.
final class SealedWriter: @unchecked Sendable {  // @unchecked: one task writes at a time (each write awaited).
    let sealing: SealedAttachment
    let handle: FileHandle
    let fileID: [UInt8]
    let keepsPartial: Bool
    private var index = 0
    private var pending = Data()

    /// Starts a new sealed file at `url` (made or emptied).
    init(creating url: URL, sealing: SealedAttachment, keepsPartial: Bool = false) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown)
        }
        self.sealing = sealing
        self.keepsPartial = keepsPartial
        handle = try FileHandle(forWritingTo: url)
        fileID = Array(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) })
        try handle.write(contentsOf: SealedAttachment.magic + fileID + [UInt8](repeating: 0, count: 8))
    }

    /// Continues the sealed download at `url`: its short last chunk is opened and taken back, to be sealed again with
    /// what comes next. Throws when a chunk does not open (the caller starts the file again).
    init(resuming url: URL, sealing: SealedAttachment) throws {
        self.sealing = sealing
        keepsPartial = true
        handle = try FileHandle(forUpdating: url)
        fileID = try SealedAttachment.fileID(handle)
        let chunks = SealedAttachment.chunkCount(fileSize: Int(try handle.seekToEnd()))
        guard chunks > 0 else { return }
        let last = chunks - 1
        try handle.seek(toOffset: UInt64(SealedAttachment.offset(ofChunk: last)))
        let sealed = try handle.read(upToCount: SealedAttachment.sealedChunkSize) ?? Data()
        let plain = try sealing.open(sealed, fileID: fileID, index: last, finalHash: nil)
        if plain.count == SealedAttachment.chunkSize {
            index = chunks
        } else {
            (index, pending) = (last, plain)
        }
    }

    func close() { try? handle.close() }

    /// Adds `data` at the end.
    func write(_ data: Data) throws {
        pending += data
        while pending.count >= SealedAttachment.chunkSize {
            try put(pending.prefix(SealedAttachment.chunkSize), finalHash: nil)
            index += 1
            pending = Data(pending.dropFirst(SealedAttachment.chunkSize))
        }
        if keepsPartial {
            if pending.isEmpty {
                try handle.truncate(atOffset: UInt64(SealedAttachment.offset(ofChunk: index)))
            } else {
                try put(pending, finalHash: nil)
            }
        }
    }

    /// Seals what is left as the final chunk, bound to the file's SHA-256, and syncs the file.
    func finish(hash: [UInt8]) throws {
        try put(pending, finalHash: hash)
        try handle.synchronize()
    }

    /// Forgets every byte written: the file holds its header alone.
    func reset() throws {
        (index, pending) = (0, Data())
        try handle.truncate(atOffset: UInt64(SealedAttachment.headerSize))
    }

    /// Writes chunk `index` (and nothing after it).
    private func put(_ plain: Data, finalHash: [UInt8]?) throws {
        let sealed = try sealing.seal(plain, fileID: fileID, index: index, finalHash: finalHash)
        let offset = UInt64(SealedAttachment.offset(ofChunk: index))
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: sealed)
        try handle.truncate(atOffset: offset + UInt64(sealed.count))
    }
}

/// Reads a sealed file's plain bytes by range, each chunk opened (the final one bound to `hash`).
struct SealedReader {
    let sealing: SealedAttachment
    let url: URL
    /// The file's SHA-256 (its name), or nil for a download under way (no final chunk).
    let hash: [UInt8]?

    /// `count` plain bytes from `offset` (fewer at the end).
    func read(offset: Int, count: Int) throws -> Data {
        var result = Data()
        let first = offset / SealedAttachment.chunkSize
        try chunks(from: first) { index, plain in
            result += plain.dropFirst(index == first ? offset % SealedAttachment.chunkSize : 0)
                .prefix(count - result.count)
            return result.count < count
        }
        return result
    }

    /// Feeds every plain byte, in order, to `body` (a chunk at a time).
    func forEachChunk(_ body: (Data) throws -> Void) throws {
        try chunks(from: 0) { _, plain in
            if !plain.isEmpty { try body(plain) }
            return true
        }
    }

    /// Opens the chunks from `first` on, through one handle, while `body` asks for more.
    private func chunks(from first: Int, _ body: (Int, Data) throws -> Bool) throws {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let fileID = try SealedAttachment.fileID(handle)
        let chunks = SealedAttachment.chunkCount(fileSize: Int(try handle.seekToEnd()))
        guard chunks > 0 else { throw SealedAttachmentError() }
        var index = first
        while index < chunks {
            try handle.seek(toOffset: UInt64(SealedAttachment.offset(ofChunk: index)))
            let sealed = try handle.read(upToCount: SealedAttachment.sealedChunkSize) ?? Data()
            let plain = try sealing.open(
                sealed, fileID: fileID, index: index, finalHash: index == chunks - 1 ? hash : nil)
            guard try body(index, plain) else { return }
            index += 1
        }
    }
}
