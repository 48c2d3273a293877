import Foundation
import GRDB
import SyncCore
import SyncOData
import SyncSQL
import SyncSQLite
import Testing

/// Runs translated filters on a real SQLite database and checks which rows match.
@Suite(.timeLimit(.minutes(3))) struct SQLTranslatorTests {
    static let columns: [String: SQLColumn] = [
        "id": SQLColumn(name: "id", type: .string, isNullable: false),
        "name": SQLColumn(name: "name", type: .string),
        "price": SQLColumn(name: "price", type: .double),
        "count": SQLColumn(name: "count", type: .integer),
        "complete": SQLColumn(name: "complete", type: .bool),
        "created": SQLColumn(name: "created", type: .date),
        "meta": SQLColumn(name: "meta", type: .json),
    ]

    static let translator = SQLTranslator(dialect: .sqlite) { columns[$0] }

    static func ms(_ text: String) -> Int64 { WireDate(parsing: text)!.millisecondsSince1970 }

    static let unicodeName = "\u{DC}n\u{EF}code stra\u{DF}e"  // "Ünïcode straße", precomposed

    static func makeDatabase() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.prepareDatabase { db in db.add(function: checkedIntegerSQLFunction) }
        let database = try DatabaseQueue(configuration: configuration)
        try database.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE items (id TEXT NOT NULL PRIMARY KEY, name TEXT, price REAL, count INTEGER,
                                        complete INTEGER, created INTEGER, meta TEXT)
                    """)
            let rows: [[(any DatabaseValueConvertible)?]] = [
                ["a", "Bob", 5.5, 10, true, ms("2012-05-21T00:00:29.300Z"), "{\"k\":1}"],
                ["b", "bob", 599.99, 0, false, ms("2020-02-29T12:34:56.789Z"), nil],
                ["c", "100%_real\\deal*?[x]", -2.5, -7, true, ms("1969-12-31T23:59:59.999Z"), nil],
                ["d", nil, nil, nil, nil, nil, nil],
                ["e", unicodeName, 1_234_567.89, 350, false, ms("2000-01-01T00:00:00.000Z"), nil],
                ["f", "  padded  ", 0.5, 7, true, ms("2001-01-01T00:00:00.000Z"), nil],
            ]
            for row in rows {
                try db.execute(
                    sql: "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)", arguments: StatementArguments(row))
            }
        }
        return database
    }

    static func matchingIDs(_ filter: String) throws -> [String] {
        let predicate = try translator.predicate(try ODataExpression(parsing: filter))
        let (sql, arguments) = predicate.render(for: .sqlite)
        return try makeDatabase().read { db in
            try String.fetchAll(
                db, sql: "SELECT id FROM items WHERE \(sql) ORDER BY id",
                arguments: StatementArguments(sqlValues: arguments))
        }
    }

    @Test(arguments: [
        ("name eq 'Bob'", ["a"]),
        ("name ne 'Bob'", ["b", "c", "d", "e", "f"]),
        ("name eq null", ["d"]),
        ("name ne null", ["a", "b", "c", "e", "f"]),
        ("null eq name", ["d"]),
        ("name gt null", []),
        ("tolower(name) eq 'bob'", ["a", "b"]),
        ("toupper(name) eq '\u{DC}N\u{CF}CODE STRASSE'", ["e"]),
        ("tolower('\u{DC}') eq '\u{FC}'", ["a", "b", "c", "d", "e", "f"]),
        ("startswith(name,'B')", ["a"]),
        ("startswith(name,'100%_')", ["c"]),
        ("startswith(name,'100%x')", []),
        ("contains(name,'*?[x]')", ["c"]),
        ("contains(name,'*')", ["c"]),
        ("contains(name,'\\')", ["c"]),
        ("endswith(name,'[x]')", ["c"]),
        ("endswith(name,'x]')", ["c"]),
        ("substringof('ob',name)", ["a", "b"]),
        ("substringof('OB',name)", []),
        ("not substringof('ob',name)", ["c", "d", "e", "f"]),
        ("endswith(name,'stra\u{DF}e')", ["e"]),
        ("startswith(name,substring(name,0,2))", ["a", "b", "c", "e", "f"]),
        ("endswith(name,substring(name,1))", ["a", "b", "c", "e", "f"]),
        ("contains(name,substring(name,1,1))", ["a", "b", "c", "e", "f"]),
        ("length(name) eq 14", ["e"]),
        ("length(name) eq 3", ["a", "b"]),
        ("indexof(name,'o') eq 1", ["a", "b"]),
        ("indexof(name,'zzz') eq -1", ["a", "b", "c", "e", "f"]),
        ("indexof(name,'\u{EF}') eq 2", ["e"]),
        ("substring(name,1) eq 'ob'", ["a", "b"]),
        ("substring(name,1,1) eq 'o'", ["a", "b"]),
        ("substring(name,0,3) eq '100'", ["c"]),
        ("substring(name,-5,3) eq 'Bob'", ["a"]),
        ("substring(name,8,3) eq 'str'", ["e"]),
        ("trim(name) eq 'padded'", ["f"]),
        ("concat(name,'!') eq 'Bob!'", ["a"]),
        ("price gt 5", ["a", "b", "e"]),
        ("not (price gt 5)", ["c", "d", "f"]),
        ("price le 5.5", ["a", "c", "f"]),
        ("price gt count", ["b", "c", "e"]),
        ("count add 200 gt 350", ["e"]),
        ("count sub 10 eq 0", ["a"]),
        ("count mul 2 eq 20", ["a"]),
        ("count mod 2 eq 1", ["f"]),
        ("count mod 2 eq -1", ["c"]),
        ("count div 3 eq -2", ["c"]),
        ("count div 4 eq 2", ["a"]),
        ("count div 0 eq 0", []),
        ("count mod 0 eq 0", []),
        ("price div 2 eq 2.75", ["a"]),
        ("price mod 2 eq 1.5", ["a"]),
        ("price mod 2 eq -0.5", ["c"]),
        ("price div 0 eq 0", []),
        ("-count eq 7", ["c"]),
        ("complete", ["a", "c", "f"]),
        ("complete eq true", ["a", "c", "f"]),
        ("complete eq false", ["b", "e"]),
        ("not complete", ["b", "d", "e"]),
        ("complete ne true", ["b", "d", "e"]),
        ("created eq datetime'2012-05-21T00:00:29.300Z'", ["a"]),
        ("created gt datetimeoffset'2012-05-21T02:00:29.299+02:00'", ["a", "b"]),
        ("created lt cast(1970-01-01T00:00:00.000Z,Edm.DateTimeOffset)", ["c"]),
        ("created eq '2000-01-01T00:00:00.000Z'", ["e"]),
        ("year(created) eq 2020 and month(created) eq 2 and day(created) eq 29", ["b"]),
        ("hour(created) eq 12 and minute(created) eq 34 and second(created) eq 56", ["b"]),
        ("year(created) eq 1969 and second(created) eq 59", ["c"]),
        ("round(price) eq 6", ["a"]),
        ("round(price) eq -3", ["c"]),
        ("floor(price) eq -3", ["c"]),
        ("ceiling(price) eq -2", ["c"]),
        ("floor(price) eq 5", ["a"]),
        ("ceiling(price) eq 600", ["b"]),
        ("floor(price) eq 0 and ceiling(price) eq 1", ["f"]),
        ("round(count) eq 10", ["a"]),
        ("id eq 'a' or id eq 'c'", ["a", "c"]),
        ("id gt 'b'", ["c", "d", "e", "f"]),
        ("name lt 'a'", ["a", "c", "f"]),
        ("1 eq 1", ["a", "b", "c", "d", "e", "f"]),
        ("1 eq 0", []),
        ("true", ["a", "b", "c", "d", "e", "f"]),
        ("price gt 1 and count lt 100", ["a", "b"]),
        ("price eq 5.5 or name eq null", ["a", "d"]),
        ("meta eq null", ["b", "c", "d", "e", "f"]),
        ("meta ne null", ["a"]),
        ("(complete eq true) eq false", ["b", "d", "e"]),
        ("startswith(name,'B') eq false", ["b", "c", "d", "e", "f"]),
    ])
    func matchesTheExpectedRows(filter: String, expected: [String]) throws {
        #expect(try Self.matchingIDs(filter) == expected)
    }

    @Test(arguments: [
        ("unknown eq 1", "unknown field 'unknown'"),
        ("name eq 1", "cannot compare a string with a number"),
        ("startswith(price,'a')", "argument 1 of 'startswith' must be a string, not a number"),
        ("name add 1 eq 2", "'add' needs numbers, not a string"),
        ("name", "the filter must be a condition, not a string"),
        ("count", "the filter must be a condition, not a number"),
        ("year(name) eq 1", "argument 1 of 'year' must be a date, not a string"),
        ("meta eq 'x'", "a JSON value can only be compared with null"),
        ("created eq 'not a date'", "cannot compare a date with a string"),
        ("round(name) eq 1", "function 'round' needs a number, not a string"),
        ("substring(name,1.5) eq 'x'", "argument 2 of 'substring' must be an integer, not a fractional number"),
    ])
    func refusesFiltersThatDoNotFitTheColumns(filter: String, message: String) throws {
        let expression = try ODataExpression(parsing: filter)
        let error = #expect(throws: ODataError.self) { try Self.translator.predicate(expression) }
        #expect(error?.description == message)
    }

    @Test func neverSplicesLiteralTextIntoSQL() throws {
        let predicate = try Self.translator.predicate(
            try ODataExpression(parsing: "name eq 'x'' OR 1=1 --' or startswith(name,'\"; DROP TABLE items')"))
        let (sql, arguments) = predicate.render(for: .sqlite)
        #expect(!sql.contains("OR 1=1"))
        #expect(!sql.contains("DROP"))
        #expect(arguments == [.text("x' OR 1=1 --"), .text("\"; DROP TABLE items*")])
        #expect(try Self.matchingIDs("name eq 'x'' OR 1=1 --'") == [])
    }

    @Test func refusesColumnNamesThatAreNotIdentifiers() throws {
        let translator = SQLTranslator(dialect: .sqlite) { SQLColumn(name: $0 == "x" ? "x\"; --" : $0, type: .string) }
        let error = #expect(throws: ODataError.self) {
            try translator.predicate(try ODataExpression(parsing: "x eq 'a'"))
        }
        #expect(error?.description == "'x\"; --' is not a valid column name")
    }

    @Test func ordersNullsFirstAndStringsByCodePoint() throws {
        let orderBy = try Self.translator.orderBy([ODataOrdering("name"), ODataOrdering("id", .descending)])
        let (sql, _) = orderBy.render(for: .sqlite)
        #expect(sql == "\"name\" ASC, \"id\" DESC")
        let ids = try Self.makeDatabase().read { db in
            try String.fetchAll(db, sql: "SELECT id FROM items ORDER BY \(sql)")
        }
        #expect(ids == ["d", "f", "c", "a", "b", "e"])
        #expect(throws: ODataError.self) { try Self.translator.orderBy([ODataOrdering("nope")]) }
    }

    @Test func writesPostgreSQLWithNumberedTypedParametersAndEscapedLike() throws {
        let translator = SQLTranslator(dialect: .postgres) { Self.columns[$0] }
        let predicate = try translator.predicate(
            try ODataExpression(parsing: "startswith(name,'50%_off\\') and id gt 'b' and count div 2 eq 1"))
        let (sql, arguments) = predicate.render(for: .postgres, firstParameterIndex: 3)
        #expect(
            sql == #"(COALESCE(("name" LIKE $3 ESCAPE '\'), FALSE) AND ("id" COLLATE "C" > $4::text)"#
                + #" AND (("count" / NULLIF($5::bigint, 0)) IS NOT DISTINCT FROM $6::bigint))"#)
        #expect(arguments == [.text("50\\%\\_off\\\\%"), .text("b"), .int(2), .int(1)])
        let orderBy = try translator.orderBy([ODataOrdering("name"), ODataOrdering("count", .descending)])
        #expect(orderBy.render(for: .postgres).sql == #""name" COLLATE "C" ASC NULLS FIRST, "count" DESC NULLS LAST"#)
        // Columns that are never null get no NULLS clause, so that their plain indexes serve the order.
        let byID = try translator.orderBy([ODataOrdering("id", .descending)])
        #expect(byID.render(for: .postgres).sql == #""id" COLLATE "C" DESC"#)
    }

    @Test(arguments: [("50%_off\\", "50\\%\\_off\\\\"), ("plain", "plain"), ("", "")])
    func escapesLikePatterns(text: String, escaped: String) {
        #expect(SQLTranslator.escapeLike(text) == escaped)
    }

    @Test(arguments: [("a*b?c[d]", "a[*]b[?]c[[]d]"), ("plain", "plain")])
    func escapesGlobPatterns(text: String, escaped: String) {
        #expect(SQLTranslator.escapeGlob(text) == escaped)
    }

    @Test func comparesNonNullableColumnsWithPlainOperatorsForIndexes() throws {
        let (sql, _) = try Self.translator.predicate(try ODataExpression(parsing: "id eq 'a' and name eq 'b'"))
            .render(for: .sqlite)
        #expect(sql == #"(("id" = ?) AND ("name" IS ?))"#)
    }
}

/// Regression: the cursor condition written out made SQLite scan the whole index (O(table)).
@Suite(.timeLimit(.minutes(3))) struct KeysetTranslationTests {
    static let columns: [String: SQLColumn] = [
        "updatedAt": SQLColumn(name: "updatedAt", type: .date, isNullable: false),
        "id": SQLColumn(name: "id", type: .string, isNullable: false),
        "name": SQLColumn(name: "name", type: .string),
    ]
    static let cursor =
        "(updatedAt gt datetimeoffset'2023-11-14T22:14:59.999Z') or "
        + "((updatedAt eq datetimeoffset'2023-11-14T22:14:59.999Z') and (id gt 'item-0999'))"

    @Test func theCursorConditionBecomesARowValueComparison() throws {
        let sqlite = SQLTranslator(dialect: .sqlite) { Self.columns[$0] }
        let (sql, arguments) = try sqlite.predicate(try ODataExpression(parsing: Self.cursor)).render(for: .sqlite)
        #expect(sql == #"(("updatedAt", "id") > (?, ?))"#)
        #expect(arguments == [.int(1_700_000_099_999), .text("item-0999")])
        let postgres = SQLTranslator(dialect: .postgres) { Self.columns[$0] }
        let (pgSQL, _) = try postgres.predicate(try ODataExpression(parsing: Self.cursor)).render(for: .postgres)
        #expect(pgSQL == #"(("updatedAt", "id" COLLATE "C") > ($1::bigint, $2::text))"#)
        // Other shapes, and nullable columns, stay as they are.
        let (other, _) = try sqlite.predicate(
            try ODataExpression(parsing: "(updatedAt gt datetime'2020-01-01T00:00:00Z') or (name eq 'x')")
        )
        .render(for: .sqlite)
        #expect(other.contains(" OR "))
    }

    @Test func sqliteAnswersTheCursorQueryWithARangeSearchAndTheSameRows() throws {
        let database = try DatabaseQueue()
        try database.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE t ("id" TEXT PRIMARY KEY NOT NULL, "updatedAt" INTEGER NOT NULL, "name" TEXT);
                    CREATE INDEX t_cursor ON t ("updatedAt", "id");
                    """)
            for index in 0..<2000 {
                try db.execute(
                    sql: "INSERT INTO t VALUES (?, ?, NULL)",
                    arguments: [String(format: "item-%04d", index), 1_700_000_099_000 + Int64(index / 2)])
            }
        }
        let translator = SQLTranslator(dialect: .sqlite) { Self.columns[$0] }
        let (sql, arguments) = try translator.predicate(try ODataExpression(parsing: Self.cursor)).render(for: .sqlite)
        let plan = try database.read { db in
            // The server's page query: named columns, ORDER BY the cursor, LIMIT and OFFSET as parameters.
            try Row.fetchAll(
                db,
                sql:
                    "EXPLAIN QUERY PLAN SELECT \"id\", \"name\" FROM t WHERE \(sql) ORDER BY \"updatedAt\", \"id\" LIMIT ? OFFSET ?",
                arguments: StatementArguments(sqlValues: arguments + [.int(1001), .int(0)])
            ).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.hasPrefix("SEARCH") })
        let ids = try database.read { db in
            try String.fetchAll(
                db, sql: "SELECT id FROM t WHERE \(sql) ORDER BY \"updatedAt\", \"id\"",
                arguments: StatementArguments(sqlValues: arguments))
        }
        #expect(ids == ["item-1998", "item-1999"])
    }
}
