import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SyncCore
import SyncOData

/// The files of a table's attachment columns (``TableConfiguration/attachmentColumns``), under
/// `/tables/{name}/attachments/{sha256}` (docs/attachments.md): `PUT` uploads, in parts with `Content-Range` to resume,
/// `HEAD` says what the server holds (or how much of the caller's upload arrived), `GET` reads, with `Range`.
///
/// A caller may read a file they uploaded or one that a row they may read names; a caller who may insert into or
/// update the table may upload. A write that names a file is checked the same way (``AttachmentRules/check(_:_:_:)``).
struct AttachmentRoutes: Sendable {
    let service: TableService

    private var rules: AttachmentRules { service.attachments }

    static let uploadOffsetHeader = HTTPField.Name("Upload-Offset")!

    func addRoutes(to group: RouterGroup<SyncRequestContext>) {
        group.put("{name}/attachments/{hash}") { request, context in try await uploadAttachment(request, context) }
        group.head("{name}/attachments/{hash}") { request, context in try await attachmentStatus(request, context) }
        group.get("{name}/attachments/{hash}") { request, context in try await downloadAttachment(request, context) }
    }

    /// The table and file named in the path: 404 for a table without attachment columns, 400 for a name that is not a
    /// SHA-256.
    private func attachmentTarget(_ call: TableCall, _ context: SyncRequestContext) async throws -> (
        TableSchema, AttachmentHash, AttachmentFiles
    ) {
        let schema = try await service.access.schema(call)
        guard let attachments = rules.files, !schema.configuration.attachmentColumns.isEmpty else {
            throw APIError(.notFound, "\(schema.name) has no attachment columns")
        }
        guard let hash = AttachmentHash(context.parameters.get("hash") ?? "") else {
            throw APIError.badRequest("An attachment is named by the SHA-256 of its bytes: 64 lowercase hex digits")
        }
        return (schema, hash, attachments)
    }

    /// `HEAD`: 200 with the size when the caller may read the file; else 404 with how much of the caller's own upload
    /// arrived (`Upload-Offset`). 401 or 403 for a caller who may neither read nor upload.
    func attachmentStatus(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = context.call
        let (schema, hash, attachments) = try await attachmentTarget(call, context)
        let reads: Bool
        do {
            reads = try await rules.mayRead(hash, schema, attachments.store, call)
        } catch let error as APIError where [.unauthorized, .forbidden, .methodNotAllowed].contains(error.status) {
            try await authorizeUpload(schema, call, else: error)
            reads = false
        }
        if reads, let size = try await attachments.store.size(of: hash) {
            var headers = Self.fileHeaders(hash)
            headers[.contentLength] = String(size)
            return Response(status: .ok, headers: headers)
        }
        let received = try await attachments.store.received(hash, by: AttachmentRules.uploader(call))
        return Response(
            status: .notFound, headers: [Self.uploadOffsetHeader: String(received), .cacheControl: "no-cache"])
    }

    /// The headers of a file: it never changes, so caches may keep it.
    private static func fileHeaders(_ hash: AttachmentHash) -> HTTPFields {
        [
            .contentType: "application/octet-stream", .eTag: "\"\(hash.hex)\"", .acceptRanges: "bytes",
            .cacheControl: "private, max-age=31536000, immutable",
        ]
    }

    func downloadAttachment(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = context.call
        let (schema, hash, attachments) = try await attachmentTarget(call, context)
        guard try await rules.mayRead(hash, schema, attachments.store, call),
            let size = try await attachments.store.size(of: hash)
        else {
            throw APIError(.notFound, "No attachment \(hash) that you may read is on the server")
        }
        var headers = Self.fileHeaders(hash)
        var status = HTTPResponse.Status.ok
        var range = 0..<size
        if let header = request.headers[.range], let asked = Self.byteRange(header, size: size) {
            guard let asked else {
                var refusal = APIError(.rangeNotSatisfiable, "The attachment has \(size) bytes")
                refusal.headers[.contentRange] = "bytes */\(size)"
                throw refusal
            }
            range = asked
            status = .partialContent
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)"
        }
        let store = attachments.store
        let sent = range
        let body = ResponseBody(contentLength: sent.count) { writer in
            try await store.read(hash, range: sent) { try await writer.write($0) }
            try await writer.finish(nil)
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// The range a `Range` header asks of a file of `size` bytes: nil when the header is not one range of bytes (then
    /// the whole file is sent, as RFC 9110 §14.2 allows), `.some(nil)` when the range is past the end (416).
    static func byteRange(_ header: String, size: Int) -> Range<Int>?? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            guard let suffix = Int(last), suffix >= 0 else { return nil }
            guard suffix > 0, size > 0 else { return .some(nil) }
            return .some(max(0, size - suffix)..<size)
        }
        guard let start = Int(first), start >= 0 else { return nil }
        let end: Int
        if last.isEmpty {
            end = size - 1
        } else {
            guard let value = Int(last), value >= start else { return nil }
            end = min(value, size - 1)
        }
        guard start < size else { return .some(nil) }
        return .some(start..<(end + 1))
    }

    /// Receives a part of a file. A refusal before its bytes are read is answered after them
    /// (``UnreadBodyMiddleware``).
    func uploadAttachment(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = context.call
        let (schema, hash, attachments) = try await attachmentTarget(call, context)
        try await authorizeUpload(schema, call)
        let part = try UploadPart(request.headers)
        let body = LimitedBody(
            base: request.body, limit: part.length ?? part.total.map { $0 - part.offset } ?? attachments.maxSize,
            maxSize: attachments.maxSize)
        // A file the caller may read is here already — the reply of its last part was lost, or its row is readable:
        // any part of it is answered as the end of the upload, after its bytes are read to their end and dropped.
        if let size = try await attachments.store.size(of: hash),
            (try? await rules.mayRead(hash, schema, attachments.store, call)) == true
        {
            for try await _ in body {}
            return completed(hash, size: size, stored: false, request)
        }
        if let total = part.total, total > attachments.maxSize {
            throw APIError(.contentTooLarge, "An attachment has at most \(attachments.maxSize) bytes")
        }
        try await checkBudget(hash, extent: part.total ?? (part.offset + (part.length ?? 0)), attachments, call)
        let outcome: UploadOutcome
        do {
            outcome = try await service.perform {
                try await attachments.store.receive(
                    hash, by: AttachmentRules.uploader(call), offset: part.offset, total: part.total,
                    restart: part.restart, body: body)
            }
        } catch let refusal as UploadRefusal {
            throw Self.apiError(refusal, hash)
        }
        switch outcome {
        case .partial(let received):
            return Response(status: .noContent, headers: [Self.uploadOffsetHeader: String(received)])
        case .complete(let size, _):
            // 201 whether or not the server held the bytes already: another user's file is not the caller's to learn
            // of (docs/attachments.md; only HEAD of one's own files says what the server holds).
            return completed(hash, size: size, stored: true, request)
        }
    }

    /// Refuses an upload that would take its uploader past their budget of unfinished uploads: 429 for one more
    /// upload than ``AttachmentFiles/maxUnfinishedUploads``, 507 past ``AttachmentFiles/maxUnfinishedBytes`` (`extent`: the
    /// bytes this upload will hold). The answer says what is kept.
    private func checkBudget(
        _ hash: AttachmentHash, extent: Int, _ attachments: AttachmentFiles, _ call: TableCall
    ) async throws {
        let pending = try await attachments.store.unfinished(by: AttachmentRules.uploader(call))
        let others = pending.filter { $0.key != hash }
        let kept = "you have \(others.count) other unfinished uploads holding \(others.values.reduce(0, +)) bytes"
        if pending[hash] == nil, others.count >= attachments.maxUnfinishedUploads {
            var refusal = APIError(
                .tooManyRequests,
                "Too many unfinished uploads: \(kept) (at most \(attachments.maxUnfinishedUploads)); finish one first",
                reason: .uploadBudget)
            refusal.headers[.retryAfter] = "60"
            throw refusal
        }
        if others.values.reduce(0, +) + extent > attachments.maxUnfinishedBytes {
            throw APIError(
                HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"),
                "This upload would pass your budget of \(attachments.maxUnfinishedBytes) bytes of unfinished uploads: "
                    + "\(kept); finish one first",
                reason: .uploadBudget)
        }
    }

    /// The answer to the upload that completes a file: 201 when this upload completed it, 200 when the caller may
    /// read the file already.
    private func completed(_ hash: AttachmentHash, size: Int, stored: Bool, _ request: Request) -> Response {
        var response = JSONResponse.make(
            stored ? .created : .ok, ["sha256": .string(hash.hex), "size": .int(Int64(size))])
        response.headers[Self.uploadOffsetHeader] = String(size)
        response.headers[.location] = LinkBuilder(request).url
        return response
    }

    /// Checks that the caller may upload to the table: they may insert into it or update it. Throws `refusal`, if
    /// given, else the refusal of the insert.
    private func authorizeUpload(_ schema: TableSchema, _ call: TableCall, else refusal: APIError? = nil)
        async throws
    {
        do {
            _ = try await service.access.authorize(.insert, schema, call)
        } catch let insert as APIError {
            do { _ = try await service.access.authorize(.update, schema, call) } catch { throw refusal ?? insert }
        }
    }

    /// An upload's refusal in the API's words; the `Upload-Offset` header says where to go on.
    private static func apiError(_ refusal: UploadRefusal, _ hash: AttachmentHash) -> APIError {
        var error: APIError
        switch refusal {
        case .wrongOffset(let received):
            error = APIError(
                .conflict, "The upload holds \(received) bytes: send the part from there", reason: .uploadOffset)
            error.headers[uploadOffsetHeader] = String(received)
        case .busy(let received):
            error = APIError(.conflict, "Another request is adding to this upload; try again", reason: .uploadBusy)
            error.headers[uploadOffsetHeader] = String(received)
            error.headers[.retryAfter] = "1"
        case .hashMismatch(let actual):
            error = APIError.badRequest(
                "The bytes hash to \(actual), not \(hash): the upload was dropped; send the file again",
                reason: .attachmentHash)
            error.headers[uploadOffsetHeader] = "0"
        case .sizeMismatch(let received):
            error = APIError.badRequest("The body goes past the size the upload declared", reason: .uploadSize)
            error.headers[uploadOffsetHeader] = String(received)
        }
        return error
    }

    /// `bytes FIRST-LAST/SIZE`, or nil.
    static func contentRange(_ header: String) -> (range: Range<Int>, total: Int)? {
        guard header.hasPrefix("bytes ") else { return nil }
        let spec = header.dropFirst("bytes ".count)
        let halves = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, let total = Int(halves[1]), total >= 0 else { return nil }
        let bounds = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), first >= 0, last >= first,
            last < total
        else { return nil }
        return (first..<(last + 1), total)
    }
}

/// What an upload request's headers say of its part: where it starts, the file's size when said, the bytes its body
/// carries (by `Content-Range` or `Content-Length`: a chunked body may not carry more than its `Content-Range` says),
/// and whether it starts the upload again (no `Content-Range`: the whole file). 400 for headers that disagree.
struct UploadPart {
    var offset = 0
    var total: Int?
    var length: Int?
    var restart = true

    init(_ headers: HTTPFields) throws {
        let length = try headers[.contentLength].map { text in
            guard let value = Int(text), value >= 0 else { throw APIError.badRequest("Content-Length: not a length") }
            return value
        }
        (total, self.length) = (length, length)
        guard let header = headers[.contentRange] else { return }
        guard let part = AttachmentRoutes.contentRange(header) else {
            throw APIError.badRequest("Content-Range: send bytes FIRST-LAST/SIZE (\(header) is not)")
        }
        if let length, length != part.range.count {
            throw APIError.badRequest("Content-Range: the body has \(length) bytes, the range \(part.range.count)")
        }
        (offset, total, self.length, restart) = (part.range.lowerBound, part.total, part.range.count, false)
    }
}

/// A request body cut at `limit` bytes: past it, a 400 (the body is longer than its declared part) or, past `maxSize`,
/// a 413.
struct LimitedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let limit: Int
    let maxSize: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let limit: Int
        let maxSize: Int
        var count = 0

        mutating func next() async throws -> ByteBuffer? {
            guard let buffer = try await base.next() else { return nil }
            count += buffer.readableBytes
            if count > limit {
                if count > maxSize {
                    throw APIError(.contentTooLarge, "An attachment has at most \(maxSize) bytes")
                }
                throw APIError.badRequest("The body is longer than the part it declares")
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), limit: limit, maxSize: maxSize)
    }
}
