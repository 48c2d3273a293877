public import Foundation
public import Hummingbird
public import Logging
public import Prometheus

/// Everything the server needs to run, with a documented default for each setting.
///
/// For example:
/// ```swift
/// var configuration = SyncServerConfiguration()
/// configuration.port = 0                      // any free port
/// configuration.tables = [.todoItem]
/// let app = try await buildApplication(configuration)
/// try await app.runService()
/// ```
public struct SyncServerConfiguration: Sendable {
    /// The address to listen on. Default `127.0.0.1`.
    public var host = "127.0.0.1"
    /// The port to listen on; 0 picks any free port. Default 8080.
    public var port = 8080
    /// Where the tables live. Default `sqlite:sync.sqlite`.
    public var database = DatabaseLocation.sqlite(path: "sync.sqlite")
    /// How long a PostgreSQL server may stay unreachable at startup (retried with backoff) before
    /// the server gives up. Default 30 s.
    public var databaseWaitLimit = Duration.seconds(30)
    /// How long a request waits for a PostgreSQL connection before it is answered 503 (while the
    /// database is unreachable, the pool keeps reconnecting in the background). Default 5 s.
    public var databaseTimeout = Duration.seconds(5)
    /// How long one request's database work may take before it is stopped and the request answered
    /// 503: on PostgreSQL, every statement (the connections' `statement_timeout`); on SQLite, every
    /// read (interrupted), while writes, one short transaction each, are not bounded. Default 10 s.
    public var queryTimeout = Duration.seconds(10)
    /// How PostgreSQL writes take their stamps; `sync-bench` alone changes it, to measure what the
    /// cursor guarantee costs.
    package var postgresStamping = PostgresTableStore.Stamping.serialized
    /// The tables to serve; when empty, the tutorial's `TodoItem` (dynamic schema, soft delete).
    public var tables: [TableConfiguration] = []
    /// Whether table requests must carry `ZUMO-API-VERSION: 2.0.x`. Default true.
    public var checksAPIVersion = true
    /// Whether a change (POST, PATCH, DELETE) may give the version as a query parameter rather than a header.
    /// Default false: any web page can make a browser send a query parameter, but not a header, so requiring the
    /// header for changes keeps pages from writing to the server (CSRF). Reads accept either.
    public var acceptsVersionQueryForChanges = false
    /// The largest request body accepted; larger is a 413. Default 1 MiB.
    public var maxBodySize = 1 << 20
    /// Whether `POST /batch` (docs/batch.md) is served and offered on table responses. Default true; false
    /// answers as a plain v2 backend does.
    public var offersBatch = true
    /// Custom APIs, served at `/api/{name}` (``CustomAPI``). None by default.
    public var apis: [CustomAPI] = []
    /// Code run for the requests and writes of a table (``TableHooks``), by table name. None by default.
    public var hooks: [String: TableHooks] = [:]
    /// How long a committed write is held by the delivery that took it to a ``TableHooks/afterCommit`` hook: when
    /// the hook throws, or the delivery is cut short, it is delivered again after this; a hook that runs longer may
    /// see the write twice (another instance delivers it too). Default 60 s.
    public var afterCommitLease = Duration.seconds(60)
    /// Adds the app's own Hummingbird routes and middleware to the server's router, after the server's own (its
    /// middleware — token checks, CORS, metrics, the 500 for an unexpected error — runs for them too, and
    /// `context.caller` is the verified caller). For JSON APIs with the tables' rules, ``apis`` is simpler. Nil by
    /// default.
    public var routes: (@Sendable (Router<SyncRequestContext>) throws -> Void)?
    /// Responses whose body has at least this many bytes are sent compressed (`Content-Encoding: gzip` or
    /// `deflate`) to clients that accept it (`Accept-Encoding`), when their body is JSON or text. nil
    /// sends every response as is. Default 1024: below that, the gzip framing and the CPU are not worth it.
    public var compressionMinimumSize: Int? = 1024
    /// The limits of HTTP connections: how many, and how long and large a request's head and body may be.
    public var connectionLimits = ConnectionLimits()
    /// How requests are shared between callers: per-caller and total bounds on requests running and waiting, and an
    /// optional per-caller rate (docs/fairness.md). On by default.
    public var fairShares = FairShares()
    /// How long a stopping server (SIGTERM, or its service group's graceful shutdown) lets requests in flight
    /// finish: it stops accepting at once, answers waiting `/changes` long polls, closes idle connections, and
    /// after this time closes every connection still open, so that it always stops. Default 10 s.
    public var shutdownTimeout = Duration.seconds(10)
    /// The bounds on one query's `$orderby` and `$filter`.
    public var queryLimits = QueryLimits()
    /// Where the server logs. Default: nowhere (the executable passes its own).
    public var logger = Logger.silent
    /// How callers prove who they are; nil serves everyone (the server says so at startup). Default nil.
    public var auth: AuthConfiguration?
    /// Which web pages of other origins may call the server; nil allows none. Default nil.
    public var cors: CORSConfiguration?
    /// When the web console (`/console`) is served: with ``auth``, to its administrators
    /// (``AuthConfiguration/console``); without, only on a loopback ``host`` unless set to
    /// ``ConsoleMode/enabled``. Default ``ConsoleMode/automatic``.
    public var console = ConsoleMode.automatic
    /// The registry `GET /metrics` renders; nil answers 404. Default nil.
    public var metricsRegistry: PrometheusCollectorRegistry?
    /// The clock that stamps `createdAt` and `updatedAt`. Default: the system clock.
    public var now: @Sendable () -> Date = { Date() }
    /// Where and how the files rows name are kept (``TableConfiguration/attachmentColumns``).
    public var attachments = AttachmentSettings()
    /// Makes the id of an item inserted without one. Default: a lowercase UUID.
    public var makeID: @Sendable () -> String = { UUID().uuidString.lowercased() }

    /// A configuration with every default.
    public init() {}

    /// The tables actually served: ``tables``, or `TodoItem` when none are configured.
    public var servedTables: [TableConfiguration] {
        (tables.isEmpty ? [.todoItem] : tables).map { table in
            var table = table
            if hooks(for: table.name)?.afterCommit != nil { table.recordsCommits = true }
            return table
        }
    }

    /// The hooks of `table` (``hooks`` names tables in any case).
    func hooks(for table: TableName) -> TableHooks? {
        hooks.first { $0.key.lowercased() == table.canonical }?.value
    }

    /// Checks that the settings fit together: a table that needs signed-in callers needs ``auth``, and a
    /// per-user table cannot be read or written anonymously.
    ///
    /// - Throws: ``ConfigurationError`` naming the table and the setting.
    public func validate() throws {
        try auth?.validate()
        try fairShares.validate()
        try cors?.validate()
        let served = Set(servedTables.map(\.name.canonical))
        for name in hooks.keys where !served.contains(name.lowercased()) {
            throw ConfigurationError("hooks: '\(name)' is not a served table")
        }
        var apiNames: Set<String> = []
        for api in apis {
            guard (1...128).contains(api.name.count),
                api.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
            else { throw ConfigurationError("api '\(api.name)': a name is 1–128 letters, digits, '_' and '-'") }
            guard apiNames.insert(api.name.lowercased()).inserted else {
                throw ConfigurationError("api '\(api.name)': two APIs have this name")
            }
            if auth == nil, api.access?.needsCaller == true {
                throw ConfigurationError("api '\(api.name)': it needs signed-in callers, but no auth is configured")
            }
        }
        for table in servedTables {
            let label = "table '\(table.name)'"
            if let scope = table.membershipScope {
                guard let members = servedTables.first(where: { $0.name.canonical == scope.members.canonical }),
                    members.members != nil
                else {
                    throw ConfigurationError(
                        "\(label): its membershipScope's members table '\(scope.members)' is not a served table with 'members'"
                    )
                }
            }
            if auth == nil {
                if table.isScoped {
                    throw ConfigurationError(
                        "\(label): \(table.scopeKind) needs an auth section (or \(AuthConfiguration.secretVariable))")
                }
                if let operation = TableOperation.allCases.first(where: { table.access[$0]?.needsCaller == true }) {
                    throw ConfigurationError(
                        "\(label): \(operation.rawValue) needs signed-in callers, but no auth is configured")
                }
            }
            if table.isScoped,
                let operation = TableOperation.allCases.first(where: {
                    table.access($0, authenticates: true) == .anonymous
                })
            {
                throw ConfigurationError(
                    "\(label): a \(table.scopeKind) table's rows belong to signed-in users; \(operation.rawValue) cannot be anonymous"
                )
            }
        }
    }
}

/// Where the server keeps its tables.
public enum DatabaseLocation: Sendable, Hashable, CustomStringConvertible {
    /// An SQLite file (created when missing).
    case sqlite(path: String)
    /// A PostgreSQL database, as `postgres://USER:PASS@HOST:PORT/DB`.
    case postgres(url: String)

    /// `sqlite` or `postgres`, as the console names the database.
    var kind: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgres: "postgres"
        }
    }

    /// Reads `sqlite:PATH` or `postgres://…` (also `postgresql://…`).
    ///
    /// - Parameter text: The location.
    /// - Throws: ``ConfigurationError`` for any other form.
    public init(parsing text: String) throws {
        if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else {
                throw ConfigurationError("--database sqlite: needs a file path, as in sqlite:sync.sqlite")
            }
            self = .sqlite(path: path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(url: text)
        } else {
            throw ConfigurationError("--database must be sqlite:PATH or postgres://USER:PASS@HOST:PORT/DB")
        }
    }

    /// The location without any password.
    public var description: String {
        switch self {
        case .sqlite(let path):
            return "sqlite:\(path)"
        case .postgres(let url):
            guard let components = URLComponents(string: url), let host = components.host else { return "postgres://…" }
            return "postgres://\(host)\(components.port.map { ":\($0)" } ?? "")\(components.path)"
        }
    }
}

extension Logger {
    /// The logger of a part that is given none: it logs nothing. The server's parts log where the app says (the
    /// ``SyncServerConfiguration/logger`` it passes down), never through a logger of their own making.
    @usableFromInline static let silent = Logger(label: "sync-server", factory: { _ in SwiftLogNoOpLogHandler() })
}
