import Foundation
import SyncCore
import SyncSQL
import Testing

@testable import SyncServer

@Suite(.timeLimit(.minutes(3))) struct ConfigurationTests {
    @Test func readsTheDocumentedJSONShape() throws {
        let json = """
            {"tables": [{"name": "TodoItem", "softDelete": true, "pageSize": 50, "maxTop": 1000,
                         "columns": {"text": "string", "complete": "bool"}},
                        {"name": "Logs", "softDelete": false}]}
            """
        let tables = try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false)).tables
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
        let tables = try ConfigurationFile(contentsOf: url).tables
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
        (#"{"fairShares": {"perCaller": 0}}"#, "fairShares.perCaller must be at least 1"),
        (
            #"{"fairShares": {"perCallerRate": -1}}"#,
            "fairShares.perCallerRate must be a number of requests a second above 0"
        ),
        (
            #"{"fairShares": {"perCallerRate": "fast"}}"#,
            "fairShares: 'perCallerRate' must be a number of requests a second"
        ),
        (#"{"fairShares": {"perUser": 2}}"#, "fairShares: unknown key 'perUser'"),
    ])
    func refusesUnknownKeysAndBadValuesNamingThem(json: String, message: String) throws {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false)).tables
        }
        #expect(error?.message == message)
    }

    @Test func readsTheFairShares() throws {
        let json =
            #"{"fairShares": {"perCaller": 2, "perCallerQueue": 8, "maxRunning": 6, "maxQueued": 40, "perCallerRate": 2.5}}"#
        let shares = try #require(
            try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false)).fairShares)
        #expect(shares.isOn && shares.perCaller == 2 && shares.perCallerQueue == 8)
        #expect(shares.maxRunning == 6 && shares.maxQueued == 40 && shares.perCallerRate == 2.5)
        let off = #"{"fairShares": {"enabled": false}}"#
        #expect(
            try ConfigurationFile(document: try ConfigurationFile.parseDocument(off, isYAML: false)).fairShares?.isOn
                == false)
    }

    @Test func namesTheFileWhenItCannotBeRead() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationFile(contentsOf: URL(fileURLWithPath: "/nonexistent/tables.json"))
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

    @Test func readsAuthCORSAndAccessFromTheFile() throws {
        let json = """
            {"auth": {"hs256Secret": "0123456789abcdef0123456789abcdef", "audience": "app", "clockSkewSeconds": 30,
                      "metrics": {"roles": ["ops"]}},
             "cors": {"allowedOrigins": ["https://app.example.com"]},
             "tables": [{"name": "TodoItem", "perUser": true, "access": {"delete": "disabled"}},
                        {"name": "Board", "access": "anonymous"}]}
            """
        let file = try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false))
        #expect(file.auth?.audience == "app" && file.auth?.clockSkew == .seconds(30))
        #expect(file.auth?.metrics == .restricted(subjects: [], roles: ["ops"]))
        #expect(file.cors?.allowedOrigins == ["https://app.example.com"])
        #expect(file.tables[0].perUser && file.tables[0].access == [.delete: .disabled])
        #expect(file.tables[1].access.count == 4 && file.tables[1].access.values.allSatisfy { $0 == .anonymous })
    }

    @Test(arguments: [
        (
            #"{"tables": [{"name": "T", "perUser": true}]}"#,
            "table 'T': perUser needs an auth section (or SYNC_AUTH_HS256_SECRET)"
        ),
        (
            #"{"tables": [{"name": "T", "access": "authenticated"}]}"#,
            "table 'T': read needs signed-in callers, but no auth is configured"
        ),
        (
            #"{"auth": {"hs256Secret": "0123456789abcdef0123456789abcdef"}, "tables": [{"name": "T", "perUser": true, "access": {"read": "anonymous"}}]}"#,
            "table 'T': a perUser table's rows belong to signed-in users; read cannot be anonymous"
        ),
        (#"{"auth": {"hs256Secret": "short"}}"#, "auth: hs256Secret must be at least 32 bytes (RFC 7518 §3.2)"),
        (
            #"{"auth": {"issuer": "x"}}"#,
            "auth: set hs256Secret (or SYNC_AUTH_HS256_SECRET) or jwksFile, or tokens cannot be checked"
        ),
        (#"{"auth": {"hs256Secret": "0123456789abcdef0123456789abcdef", "secret": 1}}"#, "auth: unknown key 'secret'"),
        (
            #"{"cors": {"allowedOrigins": ["app.example.com"]}}"#,
            "cors: 'app.example.com' is not an origin: write scheme://host[:port], as in https://app.example.com"
        ),
        (
            #"{"tables": [{"name": "T", "access": "everyone"}]}"#,
            #"table 'T' access: an access is anonymous, authenticated, disabled or {"subjects": [...], "roles": [...]}"#
        ),
    ])
    func refusesSettingsThatDoNotFitTogether(json: String, message: String) throws {
        let error = #expect(throws: ConfigurationError.self) {
            let file = try ConfigurationFile(document: try ConfigurationFile.parseDocument(json, isYAML: false))
            var configuration = SyncServerConfiguration()
            configuration.tables = file.tables
            configuration.auth = file.auth
            configuration.cors = file.cors
            try configuration.validate()
        }
        #expect(error?.message == message)
    }

    @Test func servesTodoItemWhenNoTableIsConfigured() {
        #expect(SyncServerConfiguration().servedTables == [.todoItem])
    }
}
