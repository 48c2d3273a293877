import Foundation
import SyncCore
import SyncOData
import SyncSQL

/// `input.cost.*` (issue 44): for each parser that reads client text, the time per byte of its worst known input
/// against a plain ASCII input of the same size (1 MiB; 64 KiB with `--quick`), medians of the repetitions. The
/// ratio is ASCII / worst: the target is at least 0.25 (within 4×). Each worst input is what a `String` makes
/// costly — runs of combining marks whose classes alternate (U+0301, U+0316), which normalizing reorders:
/// - `json`: a request body (``JSONValue/ParsingLimits/clientText``) whose text is such runs of 30 marks (the longest
///   stream-safe text takes) — a longer run, or a member name of marks, is refused at its first bytes. A JWT's header
///   and payload are read by the same parser.
/// - `odata`: `$filter=text eq '…'` of the same text, parsed and translated to SQL for a case-insensitive column
///   (its collation key made from the literal).
/// - `collation`: `Collation.caseInsensitive.key` of one unbroken run of alternating marks (it reads the text in its
///   stream-safe form).
/// - `like`: `contains(text,'…')` of `*`, `%` and `\` each followed by a mark, escaped per scalar.
/// - `compare` (issue 63, the client's side): `JSONValue` rows compared as the merge of a pull and the checks of a
///   push compare them, the text one unbroken run of alternating marks — against the same marks in the other order
///   (which `String`'s canonical equivalence calls equal after a quadratic sort: 49 s for 160k pairs) and against an
///   equal copy (every byte read) — beside ASCII rows compared the same two ways.
extension Cases {
    func inputCost() throws -> [BenchResult] {
        let size = quick ? 1 << 16 : 1 << 20
        func text(_ unit: String) -> String {
            String(repeating: unit, count: size / unit.utf8.count + 1)
        }
        let run = "a" + String(repeating: "\u{0301}\u{0316}", count: 15)  // 61 bytes, 30 marks
        let ascii = text("abcdefgh")
        var results: [BenchResult] = []
        func measure(_ name: String, worst: String, plain: String, _ body: (String) throws -> Void) throws {
            results.append(try cost(name, worst: worst, plain: plain, bytes: { $0.utf8.count }, body))
        }
        let marks = text(run)
        try measure("json", worst: #"{"id":"x","text":"\#(marks)"}"#, plain: #"{"id":"x","text":"\#(ascii)"}"#) {
            body in
            var body = body
            _ = try body.withUTF8 { try JSONValue(parsingUTF8: $0, limits: .clientText) }
        }
        var column = SQLColumn(name: "text", type: .string)
        column.collation = .caseInsensitive
        column.collationKeyColumn = "__ck_text"
        let collated = column
        let translator = SQLTranslator(dialect: .postgres) { name in
            name == "text" ? collated : name == "__ck_text" ? SQLColumn(name: "__ck_text", type: .string) : nil
        }
        try measure("odata", worst: "text eq '\(marks)'", plain: "text eq '\(ascii)'") { filter in
            _ = try translator.predicate(try ODataExpression(parsing: filter))
        }
        let unbroken = "a" + text("\u{0301}\u{0316}")
        try measure("collation", worst: unbroken, plain: ascii) { text in
            _ = Collation.caseInsensitive.key(text)
        }
        let wildcards = text("*\u{0301}%\u{0316}\\\u{0301}")
        try measure("like", worst: "contains(text,'\(wildcards)')", plain: "contains(text,'\(ascii)')") { filter in
            _ = try SQLTranslator(dialect: .sqlite) { $0 == "text" ? SQLColumn(name: "text", type: .string) : nil }
                .predicate(try ODataExpression(parsing: filter))
        }
        results.append(try compareCost(size: size))
        return results
    }

    /// `input.cost.compare`: three rows each — the text, another order of it (or another last letter), and an equal
    /// copy of the text — compared as the merge compares them.
    private func compareCost(size: Int) throws -> BenchResult {
        func rows(_ text: String, _ other: String) -> [JSONValue] {
            [text, other, String(decoding: Array(text.utf8), as: UTF8.self)].map { ["id": "x", "text": .string($0)] }
        }
        let pairs = String(repeating: "\u{0301}\u{0316}", count: size / 4)
        let swapped = String(repeating: "\u{0316}\u{0301}", count: size / 4)
        let letters = String(repeating: "abcdefgh", count: size / 8)
        var differing = 0
        let result = try cost(
            "compare", worst: rows("e" + pairs, "e" + swapped), plain: rows(letters + "a", letters + "b"),
            bytes: { $0[0]["text"]?.stringValue?.utf8.count ?? 1 }
        ) { rows in
            if rows[0] != rows[1] { differing += 1 }
            if rows[0] != rows[2] { differing += 1 }
        }
        precondition(differing == max(repetitions, 3) * 2, "each row differs from its other and equals its copy")
        return result
    }

    /// The nanoseconds per byte of `body` on the worst input beside a plain one, the median of at least 3 runs.
    private func cost<Input>(
        _ name: String, worst: Input, plain: Input, bytes: (Input) -> Int, _ body: (Input) throws -> Void
    ) throws -> BenchResult {
        var ours: [Double] = []
        var reference: [Double] = []
        for _ in 0..<max(repetitions, 3) {
            ours.append(Measure.seconds(try ContinuousClock().measure { try body(worst) }) / Double(bytes(worst)))
            reference.append(Measure.seconds(try ContinuousClock().measure { try body(plain) }) / Double(bytes(plain)))
        }
        return BenchResult(
            name: "input.cost.\(name)", ours: Measure.median(ours) * 1e9, reference: Measure.median(reference) * 1e9,
            unit: "ns/byte", higherIsBetter: false, n: ours.count)
    }
}
