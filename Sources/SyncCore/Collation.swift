import Foundation

/// How the strings of a column compare and sort.
public enum Collation: String, Sendable, Hashable, Codable, CaseIterable {
    /// By Unicode code points: `"B" < "a"`, `"é" > "f"`. The default, and what indexes on text serve.
    case binary
    /// Letters first, without regard to case or accents; then accents (left to right); case never counts — the
    /// order of SQL Server's default collation (`SQL_Latin1_General_CP1_CI_AS`) for Latin text: "Amélie" before
    /// "American Beauty", "resume" before "résumé", and "abc" equal to "ABC".
    case caseInsensitive

    /// A text whose code-point order is this collation's order of the texts it is made from, and which is equal for
    /// texts this collation finds equal: what a store sorts and compares instead of the text (the same bytes on every
    /// store, so every store sorts alike). Nil for ``binary``: the text itself.
    ///
    /// For ``caseInsensitive``: the text's case is folded (upper-, then lower-cased, so that "ß" matches "SS") and
    /// its compatibility decomposition (NFKD: "ﬁ" is "fi", "é" is "e" and a combining accent) split into the base
    /// characters, which come first, then U+0001 and, for each base character, U+0001 and the marks that follow
    /// it. The key changes if Swift's Unicode tables do (a new Unicode version). The text is read in its
    /// stream-safe form (``ClientText/streamSafe(_:)``), so that the key costs time linear in its length whatever
    /// it holds: case mapping and decomposition reorder each run of combining marks, in time quadratic in the run.
    ///
    /// - Parameter text: The text.
    /// - Returns: Its key, or nil for ``binary``.
    public func key(_ text: String) -> String? {
        switch self {
        case .binary:
            return nil
        case .caseInsensitive:
            var base = String.UnicodeScalarView()
            var marks = String.UnicodeScalarView()
            let text = ClientText.streamSafe(text)
            for scalar in text.uppercased().lowercased().decomposedStringWithCompatibilityMapping.unicodeScalars {
                switch scalar.properties.generalCategory {
                case .nonspacingMark, .spacingMark, .enclosingMark:
                    marks.append(scalar)
                default:
                    base.append(scalar)
                    marks.append(Self.separator)
                }
            }
            return String(base) + String(Self.separator) + String(marks)
        }
    }

    private static let separator: Unicode.Scalar = "\u{1}"
}
