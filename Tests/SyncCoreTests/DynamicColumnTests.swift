import GRDB
import SyncCore
import SyncOData
import SyncSQL
import SyncSQLite
import Testing

/// Filters on items stored as JSON text, read with `json_extract` as `.dynamic` columns.
@Suite(.timeLimit(.minutes(3))) struct DynamicColumnTests {
    static let translator = SQLTranslator(dialect: .sqlite) { field in
        field == "id"
            ? SQLColumn(name: "id", type: .string, isNullable: false)
            : SQLColumn(name: field, type: .dynamic, expression: "json_extract(\"data\", '$.\(field)')")
    }

    static func matchingIDs(_ filter: String) throws -> [String] {
        let database = try DatabaseQueue()
        return try database.write { db in
            try db.execute(sql: "CREATE TABLE docs (id TEXT PRIMARY KEY NOT NULL, data TEXT NOT NULL)")
            let rows = [
                ("a", #"{"text":"Bob","n":10,"price":5.5,"done":true,"due":"2012-05-21T00:00:29.300Z"}"#),
                ("b", #"{"text":"bob","n":-7,"price":-2.5,"done":false,"due":"2020-02-29T12:34:56.789Z"}"#),
                ("c", #"{"text":null}"#),
            ]
            for (id, data) in rows { try db.execute(sql: "INSERT INTO docs VALUES (?, ?)", arguments: [id, data]) }
            let (sql, arguments) = try translator.predicate(try ODataExpression(parsing: filter)).render(for: .sqlite)
            return try String.fetchAll(
                db, sql: "SELECT id FROM docs WHERE \(sql) ORDER BY id",
                arguments: StatementArguments(sqlValues: arguments))
        }
    }

    @Test(arguments: [
        ("text eq 'Bob'", ["a"]),
        ("text eq null", ["c"]),
        ("tolower(text) eq 'bob'", ["a", "b"]),
        ("startswith(text,'B')", ["a"]),
        ("n gt 0", ["a"]),
        ("n mod 2 eq -1", ["b"]),
        ("price div 2 eq 2.75", ["a"]),
        ("floor(price) eq -3", ["b"]),
        ("done", ["a"]),
        ("done eq false", ["b"]),
        ("not done", ["b", "c"]),
        ("due gt datetime'2015-01-01T00:00:00.000Z'", ["b"]),
        ("year(due) eq 2012 and hour(due) eq 0", ["a"]),
        ("missing eq null", ["a", "b", "c"]),
    ])
    func matchesJSONFieldsOfAnyType(filter: String, expected: [String]) throws {
        #expect(try Self.matchingIDs(filter) == expected)
    }
}
