import SyncCore
import Testing

/// The case-insensitive collation's keys: letters before accents, case never counting, compatibility forms folded.
@Suite(.timeLimit(.minutes(3))) struct CollationTests {
    let collation = Collation.caseInsensitive

    @Test func lettersComeBeforeAccentsAndCaseNeverCounts() throws {
        let key = { (text: String) in try #require(collation.key(text)) }
        #expect(try key("Amélie") < key("American Beauty"), "a binary order puts é after every ASCII letter")
        #expect(try key("resume") < key("résumé") && key("résumé") < key("Resumes"))
        #expect(try key("rèsume") < key("résume"), "accents compare left to right, then by mark")
        #expect(try key("ABC") == key("abc") && key("Straße") == key("STRASSE") && key("ﬁle") == key("FILE"))
        #expect(try key("e\u{301}") == key("é"), "composed and decomposed forms are one text")
        #expect(try key("ab") < key("abc") && key("") < key("a"))
        #expect(Collation.binary.key("x") == nil)
    }
}
