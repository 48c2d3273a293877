import Foundation
public import Hummingbird
import HummingbirdCore
import Logging
import Prometheus
import SyncCore
import SyncOData

/// Builds the sync server: opens the store, prepares the tables, and wires the routes.
///
/// Routes: the table API under `/tables` (PROTOCOL.md §3), `GET /changes` (docs/changes.md), custom APIs under
/// `/api` (``CustomAPI``), `GET /health` (liveness), `GET /ready` (readiness: the database answers),
/// `GET /metrics` (Prometheus text, when a registry is configured), `GET /openapi.yaml` and `GET /openapi-v3.yaml`.
///
/// For example:
/// ```swift
/// var configuration = SyncServerConfiguration()
/// configuration.port = 0
/// let app = try await buildApplication(configuration) { port in print("listening on port \(port)") }
/// try await app.runService()    // until SIGINT or SIGTERM; in-flight requests finish
/// ```
/// - Parameters:
///   - configuration: The server's settings.
///   - onServerRunning: Called once the server listens, with the real port.
/// - Returns: The application, ready to run.
/// - Throws: ``ConfigurationError`` or ``TableStoreError`` when the store cannot be opened or prepared.
///   (PostgreSQL is reached when the application runs: its `runService()` throws
///   ``TableStoreError/unavailable(_:)`` when the database stays unreachable for
///   ``SyncServerConfiguration/databaseWaitLimit``.)
public func buildApplication(
    _ configuration: SyncServerConfiguration,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    try configuration.validate()
    let store: any TableStore
    var postgres: PostgresTableStore?
    switch configuration.database {
    case .sqlite(let path):
        let sqlite = try SQLiteTableStore(
            path: path, now: configuration.now, logger: configuration.logger, queryTimeout: configuration.queryTimeout)
        try await sqlite.prepare(configuration.servedTables)
        try await seed(configuration, store: sqlite)
        store = sqlite
    case .postgres(let url):
        postgres = try PostgresTableStore(
            url: url, now: configuration.now, logger: configuration.logger, maximumConnections: 20,
            connectionTimeout: configuration.databaseTimeout, queryTimeout: configuration.queryTimeout,
            stamping: configuration.postgresStamping)
        store = postgres!
    }
    // Instances sharing a PostgreSQL database tell each other of their writes, for `GET /changes`.
    let changes = ChangeHub(relaying: postgres != nil)
    let attachments = try attachmentStore(configuration, postgres: postgres)
    let router = try await buildRouter(configuration, store: store, changes: changes, attachments: attachments)
    logAccess(configuration)
    let limits = configuration.connectionLimits
    let compression = configuration.compressionMinimumSize
    var app = Application(
        router: router,
        server: HTTPServerBuilder { responder in
            GuardedHTTP1Channel(
                responder: responder, limits: limits, compressionMinimumSize: compression,
                shutdownTimeout: configuration.shutdownTimeout)
        },
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "sync-server",
            // Past the limit, 128 more connections are accepted only to be told 503; then accepting waits.
            availableConnectionsDelegate: MaximumAvailableConnections(limits.maxConnections + 128)),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: configuration.logger
    )
    let afterCommit = Dictionary(
        configuration.servedTables.compactMap { table in
            configuration.hooks(for: table.name)?.afterCommit.map { (table.name.canonical, (table.name, $0)) }
        }, uniquingKeysWith: { first, _ in first })
    let delivery =
        afterCommit.isEmpty
        ? nil
        : CommitDelivery(
            store: store, hooks: afterCommit, lease: configuration.afterCommitLease, logger: configuration.logger)
    let collector = attachments.map {
        AttachmentCollector(attachments: $0, tables: store, configuration: configuration)
    }
    let tombstones = TombstoneCollector(tables: store, configuration: configuration)
    if let postgres {
        // The pool runs as a service; the tables are prepared once it runs and before the server listens.
        app.addServices(postgres, PostgresChangeRelay(store: postgres, hub: changes))
        app.beforeServerStarts {
            try await postgres.waitUntilReachable(for: configuration.databaseWaitLimit)
            try await postgres.prepare(configuration.servedTables)
            try await seed(configuration, store: postgres)
            delivery?.start()
            collector?.start()
            tombstones?.start()
        }
    } else {
        delivery?.start()
        collector?.start()
        tombstones?.start()
    }
    if let delivery { app.addServices(delivery) }
    if let collector { app.addServices(collector) }
    if let tombstones { app.addServices(tombstones) }
    return app
}

/// Where the files of attachment columns are kept: none when no table has such a column; beside the SQLite file
/// (``AttachmentSettings/directory``), or in the PostgreSQL database.
func attachmentStore(_ configuration: SyncServerConfiguration, postgres: PostgresTableStore?) throws
    -> (any AttachmentStore)?
{
    guard configuration.servedTables.contains(where: { !$0.attachmentColumns.isEmpty }) else { return nil }
    if let postgres { return PostgresAttachmentStore(store: postgres, now: configuration.now) }
    guard case .sqlite(let path) = configuration.database else { return nil }
    let directory = configuration.attachments.directory ?? (path + ".attachments")
    return try FileAttachmentStore(directory: URL(fileURLWithPath: directory), now: configuration.now)
}

/// Inserts the seed of each table that has none of its rows (``TableConfiguration/seed``). Another instance seeding
/// at the same time is no error: a row it inserted first is skipped.
func seed(_ configuration: SyncServerConfiguration, store: any TableStore) async throws {
    for table in configuration.servedTables where !table.seed.isEmpty {
        var all = ODataQuery()
        all.includeDeleted = true
        guard try await store.query(table.name, all, scope: .everything, limit: 1, maxBytes: 1 << 20).itemCount == 0
        else { continue }
        for (index, row) in table.seed.enumerated() {
            guard var fields = row.objectValue else {
                throw ConfigurationError("table '\(table.name)': seed row \(index + 1) is not an object")
            }
            let given = fields.removeValue(forKey: SystemProperty.id.rawValue)
            let id: ItemID
            do {
                if table.integerIDs {
                    // Its own number, or the next one.
                    if let number = given?.intValue {
                        id = try IntegerIDs.stored(number)
                    } else {
                        id = try IntegerIDs.stored(try await store.nextIntegerID(in: table.name))
                    }
                } else {
                    id = try given?.stringValue.map { try ItemID($0) } ?? ItemID(configuration.makeID())
                }
                _ = try await store.insert(fields, id: id, into: table.name, scope: .everything)
            } catch TableStoreError.alreadyExists {
                continue
            } catch TableStoreError.invalidItem(let reason) {
                throw ConfigurationError("table '\(table.name)': seed row \(index + 1): \(reason)")
            }
        }
        configuration.logger.info("Seeded \(table.name) with \(table.seed.count) rows")
    }
}

/// Says in one line at startup who may use the tables: a warning when anyone on the network may; and whether the
/// console is served without auth away from loopback.
func logAccess(_ configuration: SyncServerConfiguration) {
    let logger = configuration.logger
    if configuration.auth == nil, configuration.console == .enabled, !ConsoleMode.isLoopback(configuration.host) {
        logger.warning(
            "The console (/console) is on without auth: anyone who reaches \(configuration.host) may read every table")
    }
    guard let auth = configuration.auth else {
        let message: Logger.Message =
            "No auth is configured: anyone who reaches \(configuration.host) may read and write every table"
        if ConsoleMode.isLoopback(configuration.host) {
            logger.notice(message)
        } else {
            logger.warning("\(message) — set an auth section or \(AuthConfiguration.secretVariable)")
        }
        return
    }
    let keys = [auth.hs256Secret.map { _ in "HS256" }, auth.jwksFile.map { "RS256/ES256 keys of \($0)" }].compactMap {
        $0
    }
    let perUser = configuration.servedTables.filter(\.perUser).map(\.name.rawValue)
    let scoped = configuration.servedTables.filter { $0.isScoped && !$0.perUser }.map { "\($0.name) (\($0.scopeKind))" }
    let scopes = scoped.isEmpty ? "" : "; scoped tables: \(scoped.joined(separator: ", "))"
    logger.notice(
        "Tables need tokens (\(keys.joined(separator: " and "))) unless configured otherwise; per-user tables: \(perUser.isEmpty ? "none" : perUser.joined(separator: ", "))\(scopes)"
    )
}

/// The server's routes and middleware: the middleware every request passes, then the route collections by concern —
/// the service routes, the console, the tables (and `/batch`), their attachments, the change feed, the custom APIs —
/// over one table service.
func buildRouter(
    _ configuration: SyncServerConfiguration, store: any TableStore, changes: ChangeHub = ChangeHub(),
    attachments: (any AttachmentStore)? = nil
) async throws -> Router<SyncRequestContext> {
    let router = Router(context: SyncRequestContext.self)
    let stats = ServerStats()
    let consoleIsOn = configuration.console.isOn(host: configuration.host, authenticates: configuration.auth != nil)
    try await addMiddleware(to: router, configuration, stats: stats, consoleIsOn: consoleIsOn)
    try ServiceRoutes(configuration: configuration, store: store).addRoutes(to: router)
    let service = tableService(configuration, store: store, changes: changes, stats: stats, attachments: attachments)
    if consoleIsOn {
        try Console(
            service: service, configurations: configuration.servedTables, access: configuration.auth?.console,
            database: configuration.database.kind
        ).addRoutes(to: router)
    }
    let tables = TableRoutes(service: service, maxBodySize: configuration.maxBodySize)
    let batch = BatchEndpoint(tables: tables, maxBodySize: configuration.maxBodySize, store: store, changes: changes)
    let versioned = [router.group("tables")] + (configuration.offersBatch ? [router.group("batch")] : [])
    for group in versioned {
        if configuration.checksAPIVersion {
            group.add(
                middleware: APIVersionMiddleware(acceptsQueryForChanges: configuration.acceptsVersionQueryForChanges))
        }
        if configuration.offersBatch { group.add(middleware: OfferBatchMiddleware(capability: batch.capability)) }
    }
    tables.addRoutes(to: versioned[0])
    AttachmentRoutes(service: service).addRoutes(to: versioned[0])
    versioned.dropFirst().first?.post { request, context in try await batch.handle(request, context) }
    ChangeFeedRoutes(service: service).addRoutes(to: router)
    if !configuration.apis.isEmpty {
        let apis = router.group("api")
        if configuration.checksAPIVersion {
            apis.add(
                middleware: APIVersionMiddleware(acceptsQueryForChanges: configuration.acceptsVersionQueryForChanges))
        }
        CustomAPIRoutes(
            apis: configuration.apis, maxBodySize: configuration.maxBodySize, authenticates: configuration.auth != nil,
            tables: TableReader(store: store, maxPageBytes: configuration.queryLimits.maxPageBytes)
        ).addRoutes(to: apis)
    }
    try configuration.routes?(router)
    return router
}

/// The middleware every request passes, in order: the loopback host check (no auth, on loopback), client text, the
/// metrics and counts, the request log, CORS, the 500 for an unexpected error, body coding, the 405s, tokens, and the
/// callers' fair shares.
private func addMiddleware(
    to router: Router<SyncRequestContext>, _ configuration: SyncServerConfiguration, stats: ServerStats,
    consoleIsOn: Bool
) async throws {
    router.add(middleware: UnreadBodyMiddleware())
    if configuration.auth == nil, ConsoleMode.isLoopback(configuration.host) {
        router.add(middleware: LoopbackHostMiddleware())
    }
    router.add(middleware: ClientTextMiddleware())
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: StatsMiddleware(stats: stats))
    router.add(middleware: LogRequestsMiddleware(.debug))
    if let cors = configuration.cors { router.add(middleware: CORSMiddleware(configuration: cors)) }
    router.add(middleware: UnexpectedErrorMiddleware())
    router.add(middleware: BodyCodingMiddleware())
    router.add(middleware: MethodNotAllowedMiddleware(batch: configuration.offersBatch, console: consoleIsOn))
    if let auth = configuration.auth {
        router.add(
            middleware: AuthenticationMiddleware(verifier: try await TokenVerifier(auth, now: configuration.now)))
    }
    if configuration.fairShares.isOn {
        router.add(middleware: FairShareMiddleware(queue: AdmissionQueue(configuration.fairShares)))
    }
}

/// The table service of a configuration: its hooks by canonical table name, its attachment limits, and the
/// membership-scoped tables of each members table.
private func tableService(
    _ configuration: SyncServerConfiguration, store: any TableStore, changes: ChangeHub, stats: ServerStats,
    attachments: (any AttachmentStore)?
) -> TableService {
    TableService(
        store: store, authenticates: configuration.auth != nil,
        hooks: Dictionary(configuration.hooks.map { ($0.key.lowercased(), $0.value) }) { _, last in last },
        attachments: attachments.map {
            AttachmentFiles(
                store: $0, maxSize: configuration.attachments.maxSize,
                maxUnfinishedUploads: configuration.attachments.maxUnfinishedUploads,
                maxUnfinishedBytes: configuration.attachments.maxUnfinishedBytes)
        },
        groupedTables: Dictionary(
            configuration.tables.compactMap { table in
                table.membershipScope.map {
                    ($0.members.canonical, [GroupClaim.GroupedTable(table: table.name, column: $0.column)])
                }
            },
            uniquingKeysWith: +),
        changes: changes, stats: stats, queryLimits: configuration.queryLimits, makeID: configuration.makeID)
}

/// `/health`, `/ready` (for a balancer: the process is up and its database serves now), `/metrics` and the OpenAPI
/// documents.
private struct ServiceRoutes {
    let configuration: SyncServerConfiguration
    let store: any TableStore

    func addRoutes(to router: Router<SyncRequestContext>) throws {
        router.get("health") { _, _ in JSONResponse.make(.ok, ["status": "ok"]) }
        router.get("ready") { [store] _, _ in
            do {
                try await store.checkReady()
                return JSONResponse.make(.ok, ["status": "ready"])
            } catch let error as TableStoreError {
                return JSONResponse.make(
                    .serviceUnavailable, ["status": "unavailable", "reason": .string(error.description)])
            }
        }
        let registry = configuration.metricsRegistry
        let metricsAccess = configuration.auth?.metrics ?? .anonymous
        let openAPIAccess = configuration.auth?.openAPI ?? .anonymous
        router.get("metrics") { _, context in
            try Authorization.check(metricsAccess, caller: context.caller, what: "Reading the metrics")
            guard let registry else { throw APIError(.notFound, "Metrics are not enabled on this server") }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        for document in OpenAPIDocument.allCases {
            let text = try document.load()
            router.get(RouterPath(document.path)) { _, context in
                try Authorization.check(openAPIAccess, caller: context.caller, what: "Reading the OpenAPI document")
                return Response(
                    status: .ok, headers: [.contentType: "application/yaml; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(string: text)))
            }
        }
    }
}

/// The OpenAPI documents of the table API, one per dialect, compiled in from `Resources` (``EmbeddedResources``).
enum OpenAPIDocument: String, CaseIterable {
    /// `/openapi.yaml`: the 2.0.0 protocol, and the routes beside the tables.
    case v2 = "openapi"
    /// `/openapi-v3.yaml`: the tables as the Datasync dialect (3.0.0) answers them.
    case v3 = "openapi-v3"

    /// Where the server serves it.
    var path: String { rawValue + ".yaml" }

    func load() throws -> String {
        guard let text = EmbeddedResources.files[path] else {
            throw ConfigurationError("the OpenAPI document \(path) is not compiled into SyncServer")
        }
        return text
    }
}
