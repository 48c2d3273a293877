import SyncCore

/// One input: parsed as a client's body; what parses serializes and parses back to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    guard let value = try? JSONValue(parsingUTF8: bytes, limits: .clientText) else { return 0 }
    let text = value.serialized()
    guard let again = try? JSONValue(parsing: text), again == value else {
        fatalError("a parsed value does not survive its own serialization: \(text.prefix(200))")
    }
    return 0
}
