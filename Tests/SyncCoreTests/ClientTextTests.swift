import Foundation
import SyncCore
import SyncOData
import SyncSQL
import Testing

/// Client text decided from bytes and scalars (issue 44): the stream-safe rule (UAX #15) read byte by byte agrees with
/// Unicode's combining classes for every scalar; the stream-safe form; collation keys of long runs of marks; pattern
/// escapes per scalar.
@Suite(.timeLimit(.minutes(3))) struct ClientTextTests {
    @Test func theByteReadingAgreesWithTheCombiningClassOfEveryScalar() {
        var disagreements: [UInt32] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let isNonStarter = scalar.properties.canonicalCombiningClass != .notReordered
            let unit = String(scalar)
            let over = "a" + String(repeating: unit, count: ClientText.maximumNonStarterRun + 1)
            let limit = "a" + String(repeating: unit, count: ClientText.maximumNonStarterRun)
            if ClientText.isStreamSafe(over) == isNonStarter || !ClientText.isStreamSafe(limit) {
                disagreements.append(value)
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(10).map { String($0, radix: 16) })")
    }

    @Test func theStreamSafeFormBreaksEachRunAfterThirtyMarks() {
        let marks = "a" + String(repeating: "\u{0301}\u{0316}", count: 40)  // 80 marks
        let safe = ClientText.streamSafe(marks)
        #expect(!ClientText.isStreamSafe(marks) && ClientText.isStreamSafe(safe))
        #expect(safe.unicodeScalars.filter { $0 == "\u{034F}" }.count == 2)
        #expect(String(safe.unicodeScalars.filter { $0 != "\u{034F}" }) == marks)
        let text = "Ελληνικά, français, हिन्दी, 한국어"
        #expect(ClientText.streamSafe(text).utf8.elementsEqual(text.utf8))
    }

    @Test func aCollationKeyOfALongRunOfMarksIsTheKeyOfItsStreamSafeForm() {
        let marks = "e" + String(repeating: "\u{0301}\u{0316}", count: 50_000)
        #expect(Collation.caseInsensitive.key(marks) == Collation.caseInsensitive.key(ClientText.streamSafe(marks)))
        #expect(Collation.caseInsensitive.key("É") == Collation.caseInsensitive.key("é"))
    }

    @Test func patternsAreEscapedPerScalar() {
        #expect(SQLTranslator.escapeLike("%\u{0301}_\\\u{0600}\\") == "\\%\u{0301}\\_\\\\\u{0600}\\\\")
        #expect(SQLTranslator.escapeGlob("*\u{0301}?[é") == "[*]\u{0301}[?][[]é")
    }
}

/// Query strings are split on bytes and their decoded values must be stream-safe (issue 44).
@Suite(.timeLimit(.minutes(3))) struct QueryStringClientTextTests {
    @Test func aQueryValueWithALongRunOfMarksIsRefusedAndOneOfThirtyIsRead() throws {
        let long = "a" + String(repeating: "\u{0301}\u{0316}", count: 16)
        #expect(throws: ODataError.self) { try ODataQuery(parsing: "$filter=text eq '\(long)'") }
        #expect(throws: ODataError.self) {
            try ODataQuery(parsing: "$filter=" + ODataQuery.percentEncode("text eq '\(long)'"))
        }
        let thirty = "a" + String(repeating: "\u{0301}\u{0316}", count: 15)
        let query = try ODataQuery(parsing: "$top=3&$filter=" + ODataQuery.percentEncode("text eq '\(thirty)'"))
        #expect(query.top == 3 && query.filter == .binary(.eq, .member("text"), .literal(.string(thirty))))
        // A parameter that is not an option is skipped, whatever it holds; an option name that is not ASCII is unknown.
        #expect(try ODataQuery(parsing: "x=\(long)&$top=1").top == 1)
        #expect(throws: ODataError.self) { try ODataQuery(parsing: "$tóp=1") }
    }
}
