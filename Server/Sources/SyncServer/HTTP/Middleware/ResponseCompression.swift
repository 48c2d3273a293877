import NIOCore
import NIOHTTP1
import NIOHTTPCompression

/// Compression of responses (`SyncServerConfiguration.compressionMinimumSize`): a JSON or text body of at
/// least the minimum size goes compressed to a client that accepts it — gzip or deflate, as its
/// `Accept-Encoding` prefers them (deflate when both are equally welcome, as from curl and FoundationNetworking) —
/// with `Content-Encoding` and a new `Content-Length`. Such responses say `Vary: Accept-Encoding` whether
/// compressed or not, for caches between. Pages of rows shrink about tenfold (BENCHMARKS.md, "Slow links").
enum ResponseCompression {
    /// The handlers for an HTTP/1.1 pipeline, in order, between the HTTP codec and the conversion to HTTP types.
    static func handlers(from minimumSize: Int) -> [any ChannelHandler] {
        let flusher = WholeResponseFlusher()
        let compressor = HTTPResponseCompressor(initialByteBufferCapacity: 16 * 1024) { head, isSupported in
            guard isCompressible(head, minimumSize: minimumSize) else { return .doNotCompress }
            head.headers.add(name: "Vary", value: "Accept-Encoding")
            // Called while the flusher writes the head (both run on the connection's event loop).
            flusher.compresses = isSupported
            return .compressIfPossible
        }
        return [compressor, flusher]
    }

    /// Whether a response with `head` is worth compressing: JSON, YAML or text, not already encoded, and
    /// `minimumSize` bytes or more (or of a length not known in advance).
    static func isCompressible(_ head: HTTPResponseHead, minimumSize: Int) -> Bool {
        guard !head.headers.contains(name: "Content-Encoding"),
            let type = head.headers.first(name: "Content-Type")?.lowercased(),
            type.hasPrefix("application/json") || type.hasPrefix("text/") || type.contains("yaml")
        else { return false }
        guard let length = head.headers.first(name: "Content-Length").flatMap({ Int($0) }) else { return true }
        return length >= minimumSize
    }
}

/// Holds back the flushes of a response of known length until its end, so that it goes out in one write, and so
/// that the compressor before it sees the whole response at once: Hummingbird flushes the head on its own, and the
/// compressor then sends it with the uncompressed `Content-Length` (the client waits for bytes that never come).
///
/// An uncompressed body passes the compressor into the channel's buffer, and a body larger than the buffer's
/// high-water mark makes the channel unwritable; Hummingbird's writer then waits for it to become writable before it
/// writes the response's end, which only a flush brings about. So a flush asked for while the channel is unwritable
/// passes, unless the compressor holds the response (it keeps the body, and the channel stays writable). Holding
/// every flush of a response until its end left such a response unsent for good (a 300 KB item to a client that did
/// not ask for compression, one time in ten). A response of unknown length (chunked) is flushed as written.
final class WholeResponseFlusher: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Whether the compressor compresses the response whose head it is handed; set by its predicate.
    var compresses = false
    /// Whether a response of known length has begun and not ended.
    private var holding = false
    /// Whether the response being held is compressed: its flushes wait for its end whatever the channel's state.
    private var holdingCompressed = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            compresses = false
            context.write(data, promise: promise)
            holding = head.headers.contains(name: "Content-Length")
            holdingCompressed = holding && compresses
        case .body:
            context.write(data, promise: promise)
        case .end:
            context.write(data, promise: promise)
            if holding {
                holding = false
                context.flush()
            }
        }
    }

    func flush(context: ChannelHandlerContext) {
        if !holding || (!holdingCompressed && !context.channel.isWritable) { context.flush() }
    }
}
