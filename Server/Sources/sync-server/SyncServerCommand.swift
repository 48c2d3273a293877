import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import SyncServer

/// `sync-server`: the OfflineSync backend, an Azure-Mobile-Apps-compatible table API.
@main
struct SyncServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-server",
        abstract: "Serve sync tables over HTTP (Azure Mobile Apps 2.0.0 and Datasync 3.0.0).",
        subcommands: [Serve.self, Token.self, Probe.self],
        defaultSubcommand: Serve.self
    )

    /// Parses the command line, with `serve`'s options from `SYNC_SERVER_*` variables first (``EnvironmentOptions``),
    /// and runs the command.
    static func main() async {
        do {
            let arguments = try EnvironmentOptions.commandLine(
                Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment,
                subcommands: configuration.subcommands.map { $0._commandName } + ["help"])
            var command = try parseAsRoot(arguments)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// `sync-server token`: a development token, signed with the server's HS256 secret.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an HS256 token for a user, signed with the server's secret (for development and tests).",
        discussion: "The secret comes from --secret or $\(AuthConfiguration.secretVariable)."
    )

    @Option(help: "The user's id (the token's sub).")
    var sub: String

    @Option(help: "The server's hs256Secret (default: $\(AuthConfiguration.secretVariable)).")
    var secret: String?

    @Option(help: "How many seconds the token is valid.")
    var ttl = 3600

    @Option(help: "The iss claim, when the server checks one.")
    var issuer: String?

    @Option(help: "The aud claim, when the server checks one.")
    var audience: String?

    @Option(name: .customLong("role"), help: "A role for the roles claim (repeatable).")
    var roles: [String] = []

    @Option(name: .customLong("claim"), help: "Another claim as NAME=VALUE, a string (repeatable), e.g. tenant=acme.")
    var claims: [String] = []

    func run() async throws {
        guard let secret = secret ?? ProcessInfo.processInfo.environment[AuthConfiguration.secretVariable] else {
            throw ValidationError("give the server's secret: --secret or $\(AuthConfiguration.secretVariable)")
        }
        guard ttl > 0 else { throw ValidationError("--ttl must be at least 1 second") }
        guard secret.utf8.count >= 32 else { throw ValidationError("the secret must be at least 32 bytes") }
        var extra: [String: JSONValue] = [:]
        for claim in claims {
            let parts = claim.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ValidationError("--claim: NAME=VALUE, not '\(claim)'")
            }
            extra[parts[0]] = .string(parts[1])
        }
        do {
            let token = try await makeHS256Token(
                subject: sub, secret: secret, lifetime: .seconds(ttl), issuer: issuer, audience: audience,
                roles: Set(roles), claims: extra)
            print(token)
        } catch let error as ConfigurationError {
            throw ValidationError("--claim: \(error.message)")
        }
    }
}

/// `sync-server serve` (the default): runs the server.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve sync tables over HTTP (the default command).",
        discussion: """
            With no --table and no --config, serves the tutorial's TodoItem table (dynamic schema, soft delete). \
            Tokens are checked when the configuration file has an auth section or $\(AuthConfiguration.secretVariable) \
            is set. Every option may also come from the environment: SYNC_SERVER_ and its name in capitals, - as _ \
            (SYNC_SERVER_PORT=9000; a flag's variable is true or false); the command line wins. \
            GET /health answers while the process serves; GET /ready while its database does too.
            """
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks any free port.")
    var port = 8080

    @Option(
        help: """
            Where the tables live: sqlite:PATH, or postgres://USER:PASS@HOST:PORT/DB (several instances may share \
            one PostgreSQL database). Default: $DATABASE_URL if set, else sqlite:sync.sqlite.
            """)
    var database: String?

    @Option(help: "How many seconds to keep retrying an unreachable PostgreSQL server at startup.")
    var databaseWait = 30

    @Option(help: "How many seconds one request's database work may take before it is stopped (503).")
    var queryTimeout = 10.0

    @Option(name: .customLong("table"), help: "A table to serve, with a dynamic schema and soft delete (repeatable).")
    var tables: [String] = []

    @Option(
        help:
            "A JSON or YAML file describing the tables (softDelete, pageSize, maxTop, columns, perUser, access), auth and cors."
    )
    var config: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(
        help: """
            text (lines on standard error) or json (one object per line on standard output: time, level, label, \
            message, metadata; the "listening on" line too).
            """)
    var logFormat = "text"

    @Flag(help: "Accept table requests without ZUMO-API-VERSION.")
    var skipVersionCheck = false

    @Flag(help: "Accept ZUMO-API-VERSION as a query parameter on changes too (by default only a header: CSRF).")
    var allowVersionQueryForChanges = false

    @Flag(help: "Do not serve POST /batch (our extension): answer as a plain v2 backend does.")
    var noBatch = false

    @Option(
        help:
            "Compress JSON and text responses (gzip or deflate) of at least this many bytes for clients that accept it."
    )
    var compressFrom = 1024

    @Flag(help: "Send every response uncompressed.")
    var noCompression = false

    @Option(
        help: """
            The web console at /console: auto (for the administrators of auth, else only on a loopback --host), on \
            (also without auth on another address), or off.
            """)
    var console = ConsoleMode.automatic.rawValue

    @Option(help: "The largest request body accepted, in bytes (also of a batch).")
    var maxBodySize = 1 << 20

    @Option(
        help: "The largest attached file accepted, in bytes (tables' \"attachments\" columns; docs/attachments.md).")
    var maxAttachmentSize = AttachmentSettings().maxSize

    @Option(help: "The folder of attached files on SQLite (default: beside the database file, DATABASE.attachments).")
    var attachmentsDir: String?

    @Option(help: "The most unfinished attachment uploads one user keeps at once; more are answered 429.")
    var maxUnfinishedUploads = AttachmentSettings().maxUnfinishedUploads

    @Option(help: "The most bytes one user's unfinished attachment uploads may come to; past it, 507.")
    var maxUnfinishedUploadBytes = AttachmentSettings().maxUnfinishedBytes

    @Option(help: "The most open connections; more are answered 503. (default: 10000, or the open-file limit - 512)")
    var maxConnections: Int?

    @Option(
        help: """
            The most requests of one caller (a token's subject, or without one the client's address) running at \
            once; the others wait their turn (docs/fairness.md). (default: 2 per processor, at least 4)
            """)
    var perCallerRequests: Int?

    @Option(help: "The most requests of one caller waiting for their turn; one more is answered 429. (default: 256)")
    var perCallerQueue: Int?

    @Option(help: "The most requests running at once, every caller's together. (default: 8 per processor, at least 16)")
    var maxRunningRequests: Int?

    @Option(help: "The most requests waiting, every caller's together; one more is answered 503. (default: 4096)")
    var maxQueuedRequests: Int?

    @Option(help: "The most requests a second one caller may start, in bursts of as many; more are answered 429.")
    var perCallerRate: Double?

    @Flag(help: "Serve requests as they come, with no per-caller shares (docs/fairness.md).")
    var noFairShares = false

    @Option(help: "Seconds a connection may wait for its next request before it is closed.")
    var idleTimeout = 60.0

    @Option(help: "Seconds a request's head may take to arrive (then 408).")
    var headTimeout = 10.0

    @Option(help: "Seconds a request's body may take to arrive after its head (then 408).")
    var bodyTimeout = 60.0

    @Option(help: "Seconds a client may take to read a response once it is being sent (then the connection is closed).")
    var responseTimeout = 120.0

    @Option(
        help: """
            Seconds a stopping server (SIGTERM or SIGINT) lets requests in flight finish before it closes the \
            connections still open and exits 0. A second signal exits at once (status 143).
            """)
    var shutdownTimeout = 10.0

    @Option(help: "The longest request line (method, path, query) in bytes (then 414).")
    var maxRequestLine = 32 * 1024

    @Option(help: "The most bytes of request headers (then 431).")
    var maxHeaderSize = 32 * 1024

    @Option(help: "The most $orderby keys in one query.")
    var maxOrderbyKeys = 8

    @Option(help: "The most string work one $filter may ask for (one per field read by each string function).")
    var maxFilterWork = 100

    @Option(help: "The most bytes of rows in one page (a page ends after the row that passes it).")
    var maxPageBytes = 8 << 20

    @Option(
        help: ArgumentHelp(
            "Append every committed write to this file, one JSON line each.",
            discussion: """
                Each line is {"sequence", "table", "kind", "item"}: the write as it committed. Every write is \
                appended at least once, also across a crash (the database keeps it until it is appended); a \
                repeat has the same sequence.
                """))
    var auditLog: String?

    @Option(
        help: ArgumentHelp(
            "Seconds a tombstone is kept, for every soft-delete table that sets no tombstoneRetention of its own.",
            discussion: """
                Off by default: tombstones are kept for ever. A device offline longer than this is told so by its \
                next pull and reconciles by itself (docs/retention.md).
                """))
    var tombstoneRetention: Int?

    @Option(
        help: ArgumentHelp(
            "Seconds before a committed write whose after-commit delivery did not finish is delivered again.",
            discussion: """
                A delivery cut short (a hook that threw, an instance that died while it held the write) is \
                retried once this lease ends, by whichever instance runs then.
                """))
    var afterCommitLease = 60

    func run() async throws {
        let json = try bootstrapLogging()
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        var configuration: SyncServerConfiguration
        do {
            configuration = try serverConfiguration()
        } catch let error as ConfigurationError {
            throw ValidationError(error.message)
        }
        configuration.metricsRegistry = registry
        let host = self.host
        do {
            let app = try await buildApplication(configuration) { port in
                let line = "listening on http://\(host):\(port)"
                if json {
                    // Whatever the level: scripts and tests wait for this line.
                    JSONLogHandler.write(level: .notice, label: "sync-server", message: line, metadata: [:])
                } else {
                    FileHandle.standardOutput.write(Data((line + "\n").utf8))
                }
            }
            try await Self.runUntilSignalled(app, shutdownTimeout: configuration.shutdownTimeout)
        } catch let error as ConfigurationError {
            throw ValidationError(error.message)
        } catch let error as TableStoreError {
            FileHandle.standardError.write(Data("sync-server: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

/// How many stop signals have arrived.
final class SignalCount: @unchecked Sendable {  // @unchecked: only read and written on the signal sources' queue.
    var count = 0
}
