import Foundation
import OfflineSync
import SyncCore
import SyncOData
import Testing

@Suite(.timeLimit(.minutes(3))) struct ODataBuilderTests {
    typealias Q = QueryExpression

    /// The builder → OData pairs the original SDKs' tests expect.
    @Test(arguments: [
        (Q.field("Complete") == true, "(Complete eq true)"),
        (Q.always && Q.field("name").startsWith("b"), "((1 eq 1) and startswith(name,'b'))"),
        (Q.field("text") == "This text has a ' in it!", "(text eq 'This text has a '' in it!')"),
        (Q.field("name").lowercased() == Q.value("bob").lowercased(), "(tolower(name) eq tolower('bob'))"),
        (Q.field("name").contains("b"), "substringof('b',name)"),
        (Q.field("Count") + 200 > 350, "((Count add 200) gt 350)"),
        (Q.field("Id") % 2 == 1, "((Id mod 2) eq 1)"),
        (
            Q.field("Zipcode").isIn([98008, 98006, 98007]),
            "((Zipcode eq 98008) or (Zipcode eq 98006) or (Zipcode eq 98007))"
        ),
        (
            Q.field("Created") == Date(timeIntervalSince1970: 1_337_558_429.3),
            "(Created eq datetime'2012-05-21T00:00:29.300Z')"
        ),
        (Q.never || Q.field("Price") <= 5.99, "((1 eq 0) or (Price le 5.99))"),
        (Q.field("Count") == 0 && !(Q.field("Price") > 599.99), "((Count eq 0) and not((Price gt 599.99)))"),
        (Q.field("Zipcode").isBetween(98006, and: 98008), "((Zipcode ge 98006) and (Zipcode le 98008))"),
        (Q.field("x").isNull, "(x eq null)"),
        (Q.field("x").isNotNull, "(x ne null)"),
        (Q.field("Name").substring(from: 2, length: 3) == "A", "(substring(Name,2,3) eq 'A')"),
        (Q.field("Name").indexOf("x") == 2, "(indexof(Name,'x') eq 2)"),
        (Q.field("d").year == 2020, "(year(d) eq 2020)"),
        (-Q.field("x") < 3, "(-(x) lt 3)"),
        (Q.field("big") == Int64.max, "(big eq 9223372036854775807)"),
        (Q.field("p") == 1234567.89, "(p eq 1234567.89)"),
        (
            Q.field("id") == UUID(uuidString: "01234567-89AB-CDEF-0123-456789ABCDEF")!,
            "(id eq '01234567-89ab-cdef-0123-456789abcdef')"
        ),
        (Q.field("a").isIn([String]()), "(1 eq 0)"),
    ])
    func rendersLikeTheOriginalSDKs(expression: QueryExpression, expected: String) throws {
        #expect(expression.expression.odataText == expected)
        #expect(try ODataExpression(parsing: expected) == expression.expression)
    }

    @Test func joinsSuccessiveFiltersWithAnd() {
        let query = TableQuery<JSONValue>().filter(Q.field("a") == 1).filter(Q.field("b") == 2)
        #expect(query.odata.filter?.odataText == "((a eq 1) and (b eq 2))")
    }
}

@Suite(.timeLimit(.minutes(3))) struct ODataQueryStringTests {
    @Test(arguments: [
        (ODataQuery(filter: (QueryExpression.field("name") == "bob").expression), "$filter=(name%20eq%20'bob')"),
        (ODataQuery().top(0).includingTotalCount(), "$top=0&$inlinecount=allpages"),
        (
            ODataQuery().orderBy("name").orderBy("zipcode", .descending).orderBy("birthdate"),
            "$orderby=name%20asc,zipcode%20desc,birthdate%20asc"
        ),
        (ODataQuery().select(["address", "birthdate"]), "$select=address,birthdate"),
        (ODataQuery().skip(20).top(10).includingDeleted(), "$skip=20&$top=10&__includeDeleted=true"),
        (
            ODataQuery(filter: (QueryExpression.field("updatedAt") > WireDate(millisecondsSince1970: 0)).expression),
            "$filter=(updatedAt%20gt%20datetime'1970-01-01T00%3A00%3A00.000Z')"
        ),
        (
            ODataQuery(filter: (QueryExpression.field("t") == "a&b=c+d%é#").expression),
            "$filter=(t%20eq%20'a%26b%3Dc%2Bd%25%C3%A9%23')"
        ),
        (ODataQuery(), ""),
    ])
    func rendersTheExpectedQueryString(query: ODataQuery, expected: String) throws {
        #expect(query.queryString == expected)
        #expect(try ODataQuery(parsing: expected) == query)
    }

    @Test func readsEveryOptionFromARequest() throws {
        let query = try ODataQuery(
            parsing: "?$filter=((Price%20le%2010M)%20and%20(Weight%20gt%2010f))&$orderby=Price%20desc,Name"
                + "&$skip=20&$top=10&$select=Name,Price&$inlinecount=allpages&__includedeleted=TRUE&ZUMO-API-VERSION=2.0.0"
        )
        #expect(query.filter?.odataText == "((Price le 10.0) and (Weight gt 10.0))")
        #expect(query.orderBy == [ODataOrdering("Price", .descending), ODataOrdering("Name")])
        #expect(query.skip == 20)
        #expect(query.top == 10)
        #expect(query.select == ["Name", "Price"])
        #expect(query.includeTotalCount)
        #expect(query.includeDeleted)
    }

    @Test(arguments: [
        ("$count=true", "$count: unknown query option"),
        ("$expand=x", "$expand: unknown query option"),
        ("$top=-1", "$top: expected a whole number from 0 to 9223372036854775807"),
        ("$top=abc", "$top: expected a whole number from 0 to 9223372036854775807"),
        ("$skip=99999999999999999999", "$skip: expected a whole number from 0 to 9223372036854775807"),
        ("$top=1&$top=2", "$top: option given more than once"),
        ("$filter=name%20eq", "$filter: unexpected end of filter at position 7"),
        ("$filter=%ZZ", "$filter: invalid percent-encoding"),
        ("$orderby=name%20sideways", "$orderby: unknown direction 'sideways'"),
        ("$orderby=a%20b%20c", "$orderby: expected 'field', 'field asc' or 'field desc'"),
        ("$orderby=", "$orderby: expected 'field', 'field asc' or 'field desc'"),
        ("$select=a,b%20c", "$select: 'b c' is not a field name"),
        ("$inlinecount=some", "$inlinecount: expected 'allpages' or 'none'"),
        ("__includeDeleted=yes", "__includeDeleted: expected 'true' or 'false'"),
        ("__includeDeleted=true&__includedeleted=true", "__includedeleted: option given more than once"),
    ])
    func refusesBadOptionsNamingThem(text: String, message: String) {
        let error = #expect(throws: ODataError.self) { try ODataQuery(parsing: text) }
        #expect(error?.description == message)
    }

    @Test func ignoresParametersThatAreNotOptions() throws {
        #expect(try ODataQuery(parsing: "ZUMO-API-VERSION=2.0.0&custom=1&&") == ODataQuery())
    }

    @Test func keepsAPlusSignAsAPlusSign() throws {
        let query = try ODataQuery(parsing: "$filter=d%20eq%20datetimeoffset'1994-10-13T17:00:00.000+07:00'")
        #expect(query.filter?.odataText == "(d eq datetimeoffset'1994-10-13T10:00:00.000Z')")
    }
}
