import SyncCore
import SyncSQL

/// One input: its collation key, its stream-safe form (which must be stream-safe, and the text itself when it was),
/// and its pattern escapes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCollation(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    _ = Collation.caseInsensitive.key(text)
    let safe = ClientText.streamSafe(text)
    guard ClientText.isStreamSafe(safe) else { fatalError("the stream-safe form is not stream-safe") }
    if ClientText.isStreamSafe(text), !safe.utf8.elementsEqual(text.utf8) {
        fatalError("stream-safe text was changed")
    }
    _ = SQLTranslator.escapeLike(text)
    _ = SQLTranslator.escapeGlob(text)
    return 0
}
