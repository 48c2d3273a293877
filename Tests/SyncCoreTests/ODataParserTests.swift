import SyncCore
import SyncOData
import Testing

@Suite(.timeLimit(.minutes(3))) struct ODataParserTests {
    /// Filter text → its canonical rendering after parsing.
    @Test(arguments: [
        ("Complete eq true", "(Complete eq true)"),
        ("(1 eq 1) and startswith(name, 'b')", "((1 eq 1) and startswith(name,'b'))"),
        ("text eq 'This text has a '' in it!'", "(text eq 'This text has a '' in it!')"),
        ("tolower(name) eq tolower('bob')", "(tolower(name) eq tolower('bob'))"),
        ("substringof('b', name)", "substringof('b',name)"),
        ("Count add 200 gt 350", "((Count add 200) gt 350)"),
        ("Id mod 2 eq 1", "((Id mod 2) eq 1)"),
        (
            "Zipcode eq 98008 or Zipcode eq 98006 or Zipcode eq 98007",
            "((Zipcode eq 98008) or (Zipcode eq 98006) or (Zipcode eq 98007))"
        ),
        ("Created eq datetime'2012-05-21T00:00:29.300Z'", "(Created eq datetime'2012-05-21T00:00:29.300Z')"),
        ("a or b and c", "(a or (b and c))"),
        ("(a or b) and c", "((a or b) and c)"),
        ("not a eq b", "(not(a) eq b)"),
        ("not (a eq b)", "not((a eq b))"),
        ("a add b mul c", "(a add (b mul c))"),
        ("a sub b sub c", "((a sub b) sub c)"),
        ("-5 lt x", "(-5 lt x)"),
        ("- 5 lt x", "(-(5) lt x)"),
        ("-x gt 1", "(-(x) gt 1)"),
        ("Price le 5.99d", "(Price le 5.99)"),
        ("Price gt 50f", "(Price gt 50.0)"),
        ("Price eq 1.99m", "(Price eq 1.99)"),
        ("Count ne 200l", "(Count ne 200)"),
        ("Count ne 200L", "(Count ne 200)"),
        ("x eq 1e3", "(x eq 1000.0)"),
        ("x eq 1.5E-3", "(x eq 0.0015)"),
        ("address/city eq 'Paris'", "(address/city eq 'Paris')"),
        ("x eq null", "(x eq null)"),
        (
            "Created eq datetimeoffset'1994-10-13T17:00:00.0000000+07:00'",
            "(Created eq datetimeoffset'1994-10-13T10:00:00.000Z')"
        ),
        (
            "updatedAt gt cast(2024-01-02T03:04:05.678Z,Edm.DateTimeOffset)",
            "(updatedAt gt cast('2024-01-02T03:04:05.678Z',Edm.DateTimeOffset))"
        ),
        (
            "updatedAt gt cast('2024-01-02T03:04:05.678Z', Edm.DateTimeOffset)",
            "(updatedAt gt cast('2024-01-02T03:04:05.678Z',Edm.DateTimeOffset))"
        ),
        ("Id eq guid'01234567-89AB-CDEF-0123-456789ABCDEF'", "(Id eq guid'01234567-89AB-CDEF-0123-456789ABCDEF')"),
        ("substring(Name,2,3) eq 'A'", "(substring(Name,2,3) eq 'A')"),
        ("indexof(Name,'x') eq 2", "(indexof(Name,'x') eq 2)"),
        ("year(d) eq 2020 and month(d) eq 2", "((year(d) eq 2020) and (month(d) eq 2))"),
        ("round(p) ge floor(q) and ceiling(r) le 3", "((round(p) ge floor(q)) and (ceiling(r) le 3))"),
        ("concat(trim(a), toupper(b)) eq 'X'", "(concat(trim(a),toupper(b)) eq 'X')"),
        (
            "contains(name,'x') and endswith(name,'y') and length(name) gt 2",
            "(contains(name,'x') and endswith(name,'y') and (length(name) gt 2))"
        ),
        ("And eq 1", "(And eq 1)"),
        ("  ((((x))))  eq  1 ", "(x eq 1)"),
        ("done", "done"),
    ])
    func parsesToTheCanonicalForm(text: String, canonical: String) throws {
        let expression = try ODataExpression(parsing: text)
        #expect(expression.odataText == canonical)
        #expect(try ODataExpression(parsing: canonical) == expression)
    }

    @Test func buildsTheExpectedTreeForPrecedence() throws {
        let expression = try ODataExpression(parsing: "a eq 1 or b eq 2 and not c")
        #expect(
            expression
                == .binary(
                    .or, .binary(.eq, .member("a"), .literal(.int(1))),
                    .binary(.and, .binary(.eq, .member("b"), .literal(.int(2))), .not(.member("c")))))
    }

    @Test func keepsStringEscapesAndUnicode() throws {
        let expression = try ODataExpression(parsing: "name eq 'it''s Ü ''quoted'''")
        #expect(expression == .binary(.eq, .member("name"), .literal(.string("it's Ü 'quoted'"))))
    }

    @Test func readsExtremeIntegers() throws {
        #expect(
            try ODataExpression(parsing: "x eq -9223372036854775808")
                == .binary(.eq, .member("x"), .literal(.int(.min))))
        #expect(throws: ODataError.self) { try ODataExpression(parsing: "x eq 9223372036854775808") }
    }

    /// Bad filter → the exact message, with the position of the offending token (0-based).
    @Test(arguments: [
        ("name eq 'bob' eq", "unexpected end of filter at position 16"),
        ("name eq 'bob' eq eq 'x'", "unexpected token 'eq' at position 17"),
        ("", "empty filter at position 0"),
        ("name eq", "unexpected end of filter at position 7"),
        ("(name eq 'a'", "unexpected end of filter, expected ')' at position 12"),
        ("name eq 'a')", "unexpected token ')' at position 11"),
        ("name eq 'unterminated", "unterminated string literal at position 8"),
        ("foo(name)", "unknown function 'foo' at position 0"),
        ("length(a, b) eq 1", "function 'length' takes 1 argument, not 2 at position 0"),
        ("substring(a) eq 'x'", "function 'substring' takes 2 or 3 arguments, not 1 at position 0"),
        ("startswith(a) eq true", "function 'startswith' takes 2 arguments, not 1 at position 0"),
        ("x eq datetime'2000x12-12blah2:00'", "invalid datetime literal at position 5"),
        ("x eq guid'nope'", "invalid guid literal at position 5"),
        ("x eq 12abc", "invalid number at position 5"),
        ("x eq #", "unexpected character '#' at position 5"),
        ("x eq 1 and", "unexpected end of filter at position 10"),
        ("eq 1", "unexpected token 'eq' at position 0"),
        ("a/ eq 1", "expected a name after '/' at position 2"),
        ("x gt cast('2020-01-01T00:00:00Z',Edm.String)", "only cast(…,Edm.DateTimeOffset) is supported at position 33"),
        ("f(,)", "unknown function 'f' at position 0"),
        ("x eq 'a' b", "unexpected token 'b' at position 9"),
    ])
    func reportsWhatIsWrongAndWhere(text: String, message: String) {
        let error = #expect(throws: ODataError.self) { try ODataExpression(parsing: text) }
        #expect(error?.description == message)
    }

    @Test func refusesFiltersThatAreTooDeepOrTooLarge() {
        let deep = String(repeating: "(", count: 200) + "x" + String(repeating: ")", count: 200)
        #expect(throws: ODataError.self) { try ODataExpression(parsing: deep) }
        let wide = (0..<1200).map { "x eq \($0)" }.joined(separator: " or ")
        #expect(throws: ODataError.self) { try ODataExpression(parsing: wide) }
    }
}
