import HTTPTypes
import Hummingbird
import NIOCore
import SyncSQLite

/// Reads what is left of a request body that nothing read before the answer, up to ``limit`` bytes, before the answer
/// goes — whichever layer answered: a 401 before a large row, a 404 of an unknown table, a 413 of a file too large, a
/// 409 of an upload at the wrong offset. An answer that came while the client was still sending made URLSession on
/// Linux report the connection lost, not the answer, and the SDK send the request again
/// (`AttachmentSyncTests.aFileTheServerRefusesParksOnlyTheChangeThatNamesIt` in CI, 2026-12-07). A body declared past
/// the limit is not read, and one that goes past it stops being read: the answer goes at once. Outermost, so that
/// every middleware's refusal is answered the same way.
struct UnreadBodyMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The most read of a body nothing read: eight of the SDK's 2 MiB attachment parts.
    static var limit: Int { 16 << 20 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        // A body declared past the limit is not read: its refusal goes at once (the client cannot expect it taken).
        let declared = request.headers[.contentLength].map { Int($0) ?? Int.max }
        let hasBody = declared.map { $0 > 0 && $0 <= Self.limit } ?? !request.headers[values: .transferEncoding].isEmpty
        guard hasBody else { return try await next(request, context) }
        let body = request.body
        let reading = Locked(false)
        var tracked = request
        tracked.body = RequestBody(asyncSequence: ReadTracking(base: body, reading: reading))
        let answer: Result<Response, any Error>
        do { answer = .success(try await next(tracked, context)) } catch { answer = .failure(error) }
        if !reading.withLock({ $0 }) {
            var read = 0
            // A body cut short ends the reading; the answer goes as it is.
            do {
                for try await piece in body {
                    read += piece.readableBytes
                    if read > Self.limit { break }
                }
            } catch {}
        }
        return try answer.get()
    }
}

/// A request body that records when it is first read.
private struct ReadTracking: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: RequestBody
    let reading: Locked<Bool>

    func makeAsyncIterator() -> RequestBody.AsyncIterator {
        reading.withLock { $0 = true }
        return base.makeAsyncIterator()
    }
}
