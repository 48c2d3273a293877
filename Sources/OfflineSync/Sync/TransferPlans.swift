/// The upload of one attached file in parts (docs/attachments.md), as a value: the runner
/// (`AttachmentTransfers.upload`) hands it the server's answers and performs what it returns. No I/O, so every answer
/// can be tested without a server.
///
/// - `HEAD` first: 200 means the server has the file; 404 with an `Upload-Offset` no larger than the file says
///   where to go on; anything else refuses the upload.
/// - Each `PUT` carries the part from the offset. Only a 200 or 201 says the file is stored: an upload holding every
///   byte is not (the server may have died, or be checking the hash, before naming it), so the last part is sent
///   again to finish it.
/// - A 204 moves the offset forward, never back nor past the file. A 409 (the upload holds another length after a
///   lost reply, or another request adds to it or checks it now) goes on from the server's offset, after a wait
///   when the server's offset did not move, and gives up after `conflictLimit` of them.
struct UploadPlan: Sendable, Equatable {
    /// What the runner does next.
    enum Action: Sendable, Equatable {
        /// Send the part `start..<start + count` (after waiting a second, with `wait`).
        case send(start: Int, count: Int, wait: Bool)
        /// The server stores the file.
        case stored
        /// The server's answer refuses the upload.
        case refused
        /// Too many conflicting answers in a row: the server is taken to be unavailable.
        case unavailable(conflicts: Int)
    }

    let size: Int
    let chunkSize: Int
    let conflictLimit: Int
    /// The bytes the server holds, as far as its answers said.
    private(set) var offset = 0
    /// The conflicting answers so far.
    private(set) var conflicts = 0
    /// The start of the part last sent.
    private var sentStart = 0

    init(size: Int, chunkSize: Int, conflictLimit: Int) {
        self.size = size
        self.chunkSize = max(1, chunkSize)
        self.conflictLimit = conflictLimit
    }

    /// The answer to the `HEAD` that begins the upload.
    mutating func head(status: Int, uploadOffset: Int?) -> Action {
        switch (status, uploadOffset) {
        case (200, _):
            offset = size
            return .stored
        case (404, let received?) where received >= 0 && received <= size:
            offset = received
            return nextPart(wait: false)
        default:
            return .refused
        }
    }

    /// The answer to the part last sent.
    mutating func answered(status: Int, uploadOffset received: Int?) -> Action {
        switch status {
        case 200, 201:
            offset = size
            return .stored
        case 204:
            guard let received, received > sentStart, received <= size else { return .refused }
            offset = received
            return nextPart(wait: false)
        case 409:
            guard let received, received >= 0, received <= size else { return .refused }
            conflicts += 1
            guard conflicts <= conflictLimit else { return .unavailable(conflicts: conflicts) }
            let moved = received != offset
            offset = received
            return nextPart(wait: !moved)
        default:
            return .refused
        }
    }

    /// The part from the offset; once the server holds every byte, the last part again (an empty file: whole).
    private mutating func nextPart(wait: Bool) -> Action {
        let start = offset < size ? offset : max(0, size - chunkSize)
        sentStart = start
        return .send(start: start, count: min(chunkSize, size - start), wait: wait)
    }
}

/// The download of one attached file in ranges (docs/attachments.md), resumed from the bytes an earlier try left,
/// as a value: the runner (`AttachmentTransfers.download`) asks for ``range``, hands it each answer and performs the step it
/// returns on the part file and its hash. No I/O, so every answer can be tested without a server.
///
/// - 206 whose `Content-Range` starts at the offset appends its body; one labelled otherwise is an error (corrupt).
/// - 200 (a server that ignores ranges) replaces what was there with the whole file.
/// - 416 at offset 0 with a total of 0 is an empty file; 416 past the start means what an earlier try left is
///   longer than the file: the download starts again, once.
/// - 404 is a file the server does not have (or this user may not read); anything else refuses the download.
struct DownloadPlan: Sendable, Equatable {
    /// What the runner does with an answer.
    enum Step: Sendable, Equatable {
        /// Append the body to the part file.
        case append
        /// Replace the part file with the body.
        case replace
        /// Empty the part file and ask again from its start.
        case restart
        /// Nothing to write: the file is empty.
        case empty
        /// The part's `Content-Range` does not name the range asked: an error.
        case unlabelled
        /// The server has no such file (404).
        case notFound
        /// Any other answer.
        case refused
    }

    let chunkSize: Int
    /// The bytes of the part file.
    private(set) var offset: Int
    /// The file's size, once an answer said it.
    private(set) var size: Int?
    private var restarts = 0

    /// A download whose part file already holds `offset` bytes.
    init(chunkSize: Int, offset: Int) {
        self.chunkSize = max(1, chunkSize)
        self.offset = offset
    }

    /// Whether the part file holds the whole file.
    var isComplete: Bool { size.map { offset >= $0 } ?? false }

    /// The `Range` of the next request.
    var range: String { "bytes=\(offset)-\(offset + chunkSize - 1)" }

    /// The answer to the request for ``range``: its status, `Content-Range` and body's length.
    mutating func answered(status: Int, contentRange: String?, bodyCount: Int) -> Step {
        let total = contentRange.flatMap { Self.total(ofContentRange: $0) }
        switch status {
        case 206:
            guard let total, contentRange?.hasPrefix("bytes \(offset)-") == true else { return .unlabelled }
            offset += bodyCount
            size = total
            return .append
        case 200:
            offset = bodyCount
            size = bodyCount
            return .replace
        case 416 where offset == 0 && total == 0:
            size = 0
            return .empty
        case 416 where offset > 0 && restarts == 0:
            restarts += 1
            offset = 0
            return .restart
        case 404:
            return .notFound
        default:
            return .refused
        }
    }

    /// The size at the end of `bytes FIRST-LAST/SIZE`.
    static func total(ofContentRange header: String) -> Int? {
        header.split(separator: "/").last.flatMap { Int($0) }
    }
}
