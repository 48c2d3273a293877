import SyncCore
import SyncOData
import Testing

/// The v3 dialect of queries (PROTOCOL-v3.md §4, §8: OData v4 syntax under `ZUMO-API-VERSION: 3.0.x`): what it
/// adds, what it refuses that v2 takes, and how queries render for it.
@Suite(.timeLimit(.minutes(3))) struct ODataV3Tests {
    /// v4 forms → the canonical v2 rendering of what they mean.
    @Test(arguments: [
        (
            "updatedAt gt cast(2024-08-23T20:22:54.291Z,Edm.DateTimeOffset)",
            "(updatedAt gt cast('2024-08-23T20:22:54.291Z',Edm.DateTimeOffset))"
        ),
        ("rating in ('G','PG')", "((rating eq 'G') or (rating eq 'PG'))"),
        ("year in (1999) and contains(title,'a')", "((year eq 1999) and contains(title,'a'))"),
        ("not (rating in ('R'))", "not((rating eq 'R'))"),
        ("a add b in (1, 2)", "(a add ((b eq 1) or (b eq 2)))"),
    ])
    func readsV4Forms(_ text: String, _ rendered: String) throws {
        #expect(try ODataExpression(parsing: text, dialect: .v3).odataText == rendered)
    }

    /// v2-only forms are refused under v3 with a message that names the v4 form; `in` is refused under v2.
    @Test(arguments: [
        ("substringof('a', title)", ODataDialect.v3, "write contains(field,'text')"),
        ("updatedAt gt datetimeoffset'2024-01-01T00:00:00Z'", .v3, "cast("),
        ("updatedAt gt datetime'2024-01-01T00:00:00Z'", .v3, "cast("),
        ("id eq guid'01234567-89ab-cdef-0123-456789abcdef'", .v3, "guids without quotes or as strings"),
        ("rating in ('G')", .v2, "unexpected token 'in'"),
        ("rating in ()", .v3, "unexpected token ')'"),
        ("rating in (title)", .v3, "'in' takes a list of literals"),
        // Each copy of the value counts: 60 items × a 20-node value pass the 1,000-term limit.
        (
            "concat(concat(concat(concat(concat(concat(a,b),c),d),e),f),concat(g,concat(h,concat(i,j)))) in ("
                + (0..<60).map { "'\($0)'" }.joined(separator: ",") + ")",
            .v3, "more than 1000 terms"
        ),
    ])
    func refusesTheOtherDialectsForms(_ text: String, _ dialect: ODataDialect, _ message: String) {
        let error = #expect(throws: ODataError.self) { try ODataExpression(parsing: text, dialect: dialect) }
        #expect(error?.description.contains(message) == true, "\(error.map(String.init(describing:)) ?? "")")
    }

    /// OData v4's unquoted literals (issue 28, point 3), with the examples of the OData ABNF's own test cases
    /// (odata-abnf-testcases.yaml: "Date in URL", "DateTimeOffset: no seconds", "…: subseconds", "…: CEST",
    /// "…: year zero", "Correct Guid"): a date and time is the instant it names, a date its midnight in UTC, a GUID its
    /// text. v2 reads none of them (`2012` then a minus).
    @Test(arguments: [
        ("stamp lt 2022-01-01T00:00:00Z", "(stamp lt cast('2022-01-01T00:00:00.000Z',Edm.DateTimeOffset))"),
        ("stamp eq 2012-09-03T13:52Z", "(stamp eq cast('2012-09-03T13:52:00.000Z',Edm.DateTimeOffset))"),
        ("stamp eq 2012-09-03T22:09:02Z", "(stamp eq cast('2012-09-03T22:09:02.000Z',Edm.DateTimeOffset))"),
        ("stamp eq 2012-08-31T18:19:22.1Z", "(stamp eq cast('2012-08-31T18:19:22.100Z',Edm.DateTimeOffset))"),
        ("stamp eq 2012-09-03T14:53+02:00", "(stamp eq cast('2012-09-03T12:53:00.000Z',Edm.DateTimeOffset))"),
        ("stamp eq 2012-09-03T23:59-01:30", "(stamp eq cast('2012-09-04T01:29:00.000Z',Edm.DateTimeOffset))"),
        ("stamp eq 0000-01-01T00:00Z", "(stamp eq cast('0000-01-01T00:00:00.000Z',Edm.DateTimeOffset))"),
        (
            "stamp ge 2012-09-03T13:52:13.123456789012Z",
            "(stamp ge cast('2012-09-03T13:52:13.123Z',Edm.DateTimeOffset))"
        ),
        ("day eq 2012-09-03", "(day eq cast('2012-09-03T00:00:00.000Z',Edm.DateTimeOffset))"),
        ("id eq 01234567-89ab-cdef-0123-456789abcdef", "(id eq guid'01234567-89ab-cdef-0123-456789abcdef')"),
        ("id eq ABCDEF01-89AB-CDEF-0123-456789ABCDEF", "(id eq guid'ABCDEF01-89AB-CDEF-0123-456789ABCDEF')"),
        (
            "(stamp gt 2012-09-03) and (id ne deadbeef-0000-0000-0000-000000000000)",
            "((stamp gt cast('2012-09-03T00:00:00.000Z',Edm.DateTimeOffset)) and "
                + "(id ne guid'deadbeef-0000-0000-0000-000000000000'))"
        ),
        ("year(2012-09-03T13:52Z) eq 2012", "(year(cast('2012-09-03T13:52:00.000Z',Edm.DateTimeOffset)) eq 2012)"),
        // The casts the Datasync client writes for a DateOnly and a Guid (PROTOCOL-v3.md §4).
        ("day eq cast(2023-12-15,Edm.Date)", "(day eq cast('2023-12-15T00:00:00.000Z',Edm.DateTimeOffset))"),
        (
            "id eq cast(01234567-89ab-cdef-0123-456789abcdef,Edm.Guid)",
            "(id eq guid'01234567-89ab-cdef-0123-456789abcdef')"
        ),
        // Names and numbers that only look like the start of one stay what they were.
        ("deadbeef eq 1234", "(deadbeef eq 1234)"),
        ("n eq 12345678", "(n eq 12345678)"),
    ])
    func readsV4UnquotedLiterals(_ text: String, _ rendered: String) throws {
        #expect(try ODataExpression(parsing: text, dialect: .v3).odataText == rendered)
    }

    /// What the ABNF refuses is refused with the literal named and the forms to write; a time of day has no column
    /// to compare with; and v2 keeps reading `2022-01-01` as it always did.
    @Test(arguments: [
        ("stamp eq 2011-12-31T24:00Z", ODataDialect.v3, "invalid DateTimeOffset literal '2011-12-31T24:00Z'"),
        ("stamp eq 2012-09-03T24:00-03:00", .v3, "invalid DateTimeOffset literal"),
        ("stamp eq 2012-02-30T10:00Z", .v3, "invalid DateTimeOffset literal"),
        ("stamp eq 2012-09-03T13:52", .v3, "invalid DateTimeOffset literal"),
        ("day eq 2012-9-3", .v3, "invalid Date literal"),
        ("day eq 2012-09-03x", .v3, "invalid Date literal"),
        ("id eq 01234g67-89ab-cdef-0123-456789abcdef", .v3, "invalid number"),
        ("at eq 11:22:33", .v3, "TimeOfDay literals such as 11:22:33 are not supported"),
        ("at eq cast(09:52:35.000,Edm.TimeOfDay)", .v3, "only cast(…,Edm.DateTimeOffset), cast(…,Edm.Date) and"),
        ("id eq cast(0123,Edm.Guid)", .v3, "invalid guid in cast"),
        ("day eq cast(2023-12-15,Edm.Date)", .v2, "only cast(…,Edm.DateTimeOffset)"),
        ("stamp lt 2022-01-01T00:00:00Z", .v2, "unexpected token '-'"),
        ("id eq 01234567-89ab-cdef-0123-456789abcdef", .v2, "unexpected token '-'"),
    ])
    func refusesMalformedV4Literals(_ text: String, _ dialect: ODataDialect, _ message: String) {
        let error = #expect(throws: ODataError.self) { try ODataExpression(parsing: text, dialect: dialect) }
        #expect(error?.description.contains(message) == true, "\(error.map(String.init(describing:)) ?? "")")
    }

    @Test func queryOptionsFollowV4Rules() throws {
        let query = try ODataQuery(
            parsing: "$Filter=year%20gt%202000&$COUNT=true&$inlinecount=none&$apply=x&$top=5&__includedeleted=TRUE",
            dialect: .v3)
        #expect(query.filter?.odataText == "(year gt 2000)")
        #expect(query.includeTotalCount)
        #expect(query.includeDeleted)
        #expect(query.top == 5)
        // Under v2 the same unknown option is refused, and `$count` is unknown.
        #expect(throws: ODataError.self) { try ODataQuery(parsing: "$apply=x") }
        #expect(throws: ODataError.self) { try ODataQuery(parsing: "$count=true") }
        #expect(throws: ODataError.self) { try ODataQuery(parsing: "$count=yes", dialect: .v3) }
        #expect(throws: ODataError.self) { try ODataQuery(parsing: "$top=1&$TOP=2", dialect: .v3) }
    }

    /// What a v3 client sends: the keyset filter of a pull with its date as an unquoted cast, `$count=true`,
    /// `__includedeleted=true`; and it parses back to the same query under v3.
    @Test func rendersAQueryForV3AndReadsItBack() throws {
        let stamp = try #require(WireDate(parsing: "2024-08-23T20:22:54.291Z"))
        let after = ODataExpression.binary(
            .or, .binary(.gt, .member("updatedAt"), .literal(.date(stamp, .datetimeoffset))),
            .binary(
                .and, .binary(.eq, .member("updatedAt"), .literal(.date(stamp, .datetimeoffset))),
                .binary(.gt, .member("id"), .literal(.string("a1")))))
        let query = ODataQuery(
            filter: after, orderBy: [ODataOrdering("updatedAt"), ODataOrdering("id")], top: 100,
            includeTotalCount: true, includeDeleted: true)
        let text = query.queryString(dialect: .v3)
        #expect(
            text
                == "$filter=((updatedAt%20gt%20cast(2024-08-23T20%3A22%3A54.291Z,Edm.DateTimeOffset))%20or%20"
                + "((updatedAt%20eq%20cast(2024-08-23T20%3A22%3A54.291Z,Edm.DateTimeOffset))%20and%20(id%20gt%20'a1')))"
                + "&$orderby=updatedAt%20asc,id%20asc&$top=100&$count=true&__includedeleted=true")
        let back = try ODataQuery(parsing: text, dialect: .v3)
        #expect(back.filter?.odataText(dialect: .v3) == after.odataText(dialect: .v3))
        #expect(back.top == 100 && back.includeTotalCount && back.includeDeleted)
        #expect(query.queryString == query.queryString(dialect: .v2))
    }
}
