/// What text from a client may hold, decided from its bytes and Unicode scalars, never from `String`'s grapheme
/// semantics — hashing, comparing and case-mapping a `String` normalize it, and normalizing a run of combining marks
/// that is not in canonical order reorders it in time quadratic in the run's length (a 1 MB member name cost a
/// minute of CPU).
///
/// The rule is Unicode's *stream-safe text format* (UAX #15 §13): no run of more than 30 non-starters (scalars
/// with a canonical combining class other than 0). Every `String` operation on stream-safe text costs time linear
/// in its length; no written language needs longer runs.
public enum ClientText {
    /// The longest run of non-starters stream-safe text holds (UAX #15: 30).
    public static let maximumNonStarterRun = 30

    /// Whether `text` is stream-safe (no run of more than ``maximumNonStarterRun`` non-starters); ASCII text is,
    /// at the cost of one scan of its bytes.
    ///
    /// - Parameter text: The text.
    /// - Returns: True when the text is stream-safe.
    public static func isStreamSafe(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isStreamSafe(utf8: $0) }
    }

    /// Whether the valid UTF-8 `bytes` are stream-safe, read byte by byte: a scalar below U+0300 (a lead byte below
    /// 0xCC, or ASCII) is a starter without being decoded; others are decoded and classified by ``isNonStarter(_:)``.
    static func isStreamSafe(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var run = 0
        var index = 0
        while index < bytes.count {
            let lead = bytes[index]
            guard lead >= 0xCC else {
                if lead < 0x80 || lead >= 0xC0 { run = 0 }  // a scalar below U+0300 (continuation bytes are skipped)
                index += 1
                continue
            }
            var scalar: UInt32
            var length: Int
            switch lead {
            case 0xCC..<0xE0: (scalar, length) = (UInt32(lead & 0x1F), 2)
            case 0xE0..<0xF0: (scalar, length) = (UInt32(lead & 0x0F), 3)
            default: (scalar, length) = (UInt32(lead & 0x07), 4)
            }
            for offset in 1..<length where index + offset < bytes.count {
                scalar = scalar << 6 | UInt32(bytes[index + offset] & 0x3F)
            }
            index += length
            if isNonStarter(scalar) {
                run += 1
                if run > maximumNonStarterRun { return false }
            } else {
                run = 0
            }
        }
        return true
    }

    /// `text` in the stream-safe text format: U+034F COMBINING GRAPHEME JOINER (a starter that changes no
    /// rendering) inserted after every ``maximumNonStarterRun`` non-starters in a row, as UAX #15 prescribes. Text
    /// that is already stream-safe is returned as it is.
    ///
    /// - Parameter text: The text.
    /// - Returns: Its stream-safe form, which every `String` operation handles in linear time.
    public static func streamSafe(_ text: String) -> String {
        guard !isStreamSafe(text) else { return text }
        var result = String.UnicodeScalarView()
        var run = 0
        for scalar in text.unicodeScalars {
            if !isNonStarter(scalar.value) {
                run = 0
            } else {
                if run == maximumNonStarterRun {
                    result.append(graphemeJoiner)
                    run = 0
                }
                run += 1
            }
            result.append(scalar)
        }
        return String(result)
    }

    /// Whether the scalar `value` is a non-starter (a canonical combining class other than 0). Below U+0300 none is,
    /// and of U+0300–U+036F (the combining marks most text, and most abuse, holds) all are but U+034F, without a
    /// look-up of the scalar's properties.
    private static func isNonStarter(_ value: UInt32) -> Bool {
        if value < 0x0300 { return false }
        if value <= 0x036F { return value != 0x034F }
        return Unicode.Scalar(value).map { $0.properties.canonicalCombiningClass != .notReordered } ?? false
    }

    private static let graphemeJoiner: Unicode.Scalar = "\u{034F}"
}
