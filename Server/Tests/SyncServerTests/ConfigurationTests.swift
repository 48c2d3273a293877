import Foundation
import SyncCore
import SyncSQL
import Testing

@testable import SyncServer

@Suite struct ConfigurationTests {
    @Test func readsTheDocumentedJSONShape() throws {
        let json = """
            {"tables": [{"name": "TodoItem", "softDelete": true, "pageSize": 50, "maxTop": 1000,
                         "columns": {"text": "string", "complete": "bool"}},
                        {"name": "Logs", "softDelete": false}]}
            """
        let tables = try TableConfiguration.tables(from: try TableConfiguration.parseDocument(json, isYAML: false))
        #expect(tables.map(\.name.rawValue) == ["TodoItem", "Logs"])
        #expect(tables[0].columns == ["text": .string, "complete": .bool])
        #expect(tables[1].softDelete == false)
        #expect(tables[1].columns == nil)
        #expect(tables[1].pageSize == 50 && tables[1].maxTop == 1000)
    }

    @Test func readsTheSameKeysFromYAMLFiles() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("tables.yaml")
        try """
        tables:
          - name: TodoItem
            pageSize: 20
            columns:
              text: string
              due: date
              weight: double
              count: int
        """.write(to: url, atomically: true, encoding: .utf8)
        let tables = try TableConfiguration.load(from: url)
        #expect(tables.count == 1)
        #expect(tables[0].pageSize == 20)
        #expect(tables[0].columns == ["text": .string, "due": .date, "weight": .double, "count": .integer])
    }

    @Test(arguments: [
        (#"{"tables": [{"name": "T", "pagesize": 5}]}"#, "table 'T': unknown key 'pagesize'"),
        (#"{"tables": [], "extra": 1}"#, "unknown key 'extra'"),
        (#"{"tables": [{"softDelete": true}]}"#, "tables[0] needs a 'name'"),
        (#"{"tables": [{"name": "1bad"}]}"#, "table '1bad': Invalid table name: it must start with a letter"),
        (#"{"tables": [{"name": "T", "pageSize": 0}]}"#, "table 'T': pageSize must be at least 1"),
        (#"{"tables": [{"name": "T", "maxTop": "many"}]}"#, "table 'T': 'maxTop' must be a whole number"),
        (#"{"tables": [{"name": "T", "softDelete": "yes"}]}"#, "table 'T': 'softDelete' must be true or false"),
        (
            #"{"tables": [{"name": "T", "columns": {"a": "text"}}]}"#,
            #"table 'T': column types are string, int, double, bool or date, not "text""#
        ),
        (
            #"{"tables": [{"name": "T", "columns": {"bad name": "string"}}]}"#,
            "table 'T', column 'bad name': use 1–128 letters, digits and '_', starting with a letter"
        ),
        (#"{"tables": [{"name": "T"}, {"name": "t"}]}"#, "table 't' is configured twice"),
        (
            #"{"tables": [{"name": "sqlite_x"}]}"#,
            "table 'sqlite_x': names starting with 'sqlite_' are reserved by the database"
        ),
    ])
    func refusesUnknownKeysAndBadValuesNamingThem(json: String, message: String) throws {
        let error = #expect(throws: ConfigurationError.self) {
            try TableConfiguration.tables(from: try TableConfiguration.parseDocument(json, isYAML: false))
        }
        #expect(error?.message == message)
    }

    @Test func namesTheFileWhenItCannotBeRead() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try TableConfiguration.load(from: URL(fileURLWithPath: "/nonexistent/tables.json"))
        }
        #expect(error?.message == "/nonexistent/tables.json: cannot read the file")
    }

    @Test func parsesDatabaseLocationsAndNeverPrintsAPassword() throws {
        #expect(try DatabaseLocation(parsing: "sqlite:data/sync.sqlite") == .sqlite(path: "data/sync.sqlite"))
        let postgres = try DatabaseLocation(parsing: "postgres://sync:secret@db.local:5432/sync")
        #expect(postgres.description == "postgres://db.local:5432/sync")
        #expect(throws: ConfigurationError.self) { try DatabaseLocation(parsing: "mysql://x") }
        #expect(throws: ConfigurationError.self) { try DatabaseLocation(parsing: "sqlite:") }
    }

    @Test func readsPostgreSQLURLsWithEscapedPasswordsAndSSLModes() throws {
        let url = try DatabaseURL(parsing: "postgresql://sync:p%40ss%3Aword@db.local/app?sslmode=require")
        #expect(url.user == "sync" && url.password == "p@ss:word" && url.database == "app")
        #expect(url.port == 5432)
        #expect(url.endpoint == "db.local:5432/app")
        #expect(try DatabaseURL(parsing: "postgres://sync@db.local:6000").database == nil)
        for bad in ["postgres://db.local/app", "postgres:///app", "postgres://u@db/app?sslmode=verify-full"] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try DatabaseURL(parsing: bad) }
        }
    }

    @Test func servesTodoItemWhenNoTableIsConfigured() {
        #expect(SyncServerConfiguration().servedTables == [.todoItem])
    }
}
