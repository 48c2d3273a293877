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

    /// Whether `scalars` hold no run of more than ``maximumNonStarterRun`` non-starters.
    ///
    /// - Parameter scalars: The text's Unicode scalars.
    /// - Returns: True when the text is stream-safe.
    public static func isStreamSafe(_ scalars: some Sequence<Unicode.Scalar>) -> Bool {
        var run = 0
        for scalar in scalars {
            if scalar.isASCII || scalar.properties.canonicalCombiningClass == .notReordered {
                run = 0
            } else {
                run += 1
                if run > maximumNonStarterRun { return false }
            }
        }
        return true
    }

    /// Whether `text` is stream-safe (no run of more than ``maximumNonStarterRun`` non-starters); ASCII text is,
    /// at the cost of one scan of its bytes.
    ///
    /// - Parameter text: The text.
    /// - Returns: True when the text is stream-safe.
    public static func isStreamSafe(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 < 0x80 } || isStreamSafe(text.unicodeScalars)
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
            if scalar.isASCII || scalar.properties.canonicalCombiningClass == .notReordered {
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

    private static let graphemeJoiner: Unicode.Scalar = "\u{034F}"
}
