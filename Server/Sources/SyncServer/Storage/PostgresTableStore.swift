public import Foundation
public import Logging
import NIOCore
import NIOSSL
import PostgresNIO
public import ServiceLifecycle
import SyncCore
import SyncSQL
import SyncSQLite

/// The store for scale: every table in one PostgreSQL database, shared by any number of stateless
/// `sync-server` instances.
///
/// Its connection pool is a `Service`: run it in the application's service group (``buildApplication(_:onServerRunning:)``
/// does). The §5 cursor guarantee holds across instances because each write to a table first locks
/// that table's row in `__sync_tables` and takes its stamp from there (`max(now, last stamp + 1 ms)`):
/// writes to one table commit one after another, in stamp order, so no write can commit later with
/// a cursor at or below one a reader has already seen. `docs/postgres-cursor.md` explains the choice
/// and what it costs.
///
/// For example:
/// ```swift
/// let store = try PostgresTableStore(url: "postgres://sync:secret@db.local:5432/sync")
/// // run `store` as a service, then:
/// try await store.waitUntilReachable(for: .seconds(30))
/// try await store.prepare([.todoItem])
/// ```
public final class PostgresTableStore: TableStore, Service {
    let client: PostgresClient
    /// The same database, for the single connection that checks reachability at startup.
    let probe: PostgresConnection.Configuration
    /// `host:port/database`, for messages (never the password).
    let endpoint: String
    let now: @Sendable () -> Date
    let logger: Logger
    let stamping: Stamping
    /// How long a request waits for a pooled connection before it is answered 503.
    let connectionTimeout: Duration
    /// How long one request's database work may take (the connections' `statement_timeout`).
    let queryTimeout: Duration
    let schemas: SchemaCache
    /// The atomic set this store's work runs in: the set of the store ``atomically(_:)`` hands its body; nil for the
    /// store itself.
    private let joinedSet: PostgresHeldTransaction?

    /// How writes take their `updatedAt`.
    package enum Stamping: Sendable, Hashable {
        /// Under the table's bookkeeping row lock — for a per-user table, under the owner's row of
        /// `__sync_owner_stamps`, so that users do not wait for each other — strictly increasing in commit
        /// order (the default).
        case serialized
        /// Under the table's bookkeeping row lock even for per-user tables: `sync-bench` alone uses it, to
        /// show what the per-user lock saves.
        case tableRow
        /// The clock alone, with no lock: what the original servers did. It breaks the cursor
        /// guarantee and exists only so that `sync-bench` can measure what the guarantee costs.
        case clockOnly
    }

    /// Connects lazily to the database at `url` (nothing is sent until the store is used).
    ///
    /// - Parameters:
    ///   - url: `postgres://USER:PASS@HOST:PORT/DB`, optionally with `?sslmode=disable|prefer|require`
    ///     (default `prefer`, as libpq).
    ///   - now: The clock that stamps `createdAt` and `updatedAt`.
    ///   - logger: Where the pool, its probes and its change relay log connection trouble. Default: nowhere.
    ///   - maximumConnections: The most connections this instance opens. Default 20.
    ///   - connectionTimeout: How long a request waits for a connection before failing with
    ///     ``TableStoreError/unavailable(_:)``. Default 5 s.
    ///   - queryTimeout: How long one request's database work may take before PostgreSQL cancels it
    ///     and the request fails with ``TableStoreError/unavailable(_:)``. Default 10 s.
    /// - Throws: ``ConfigurationError`` for a URL that is not of that form.
    public convenience init(
        url: String, now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = .silent, maximumConnections: Int = 20,
        connectionTimeout: Duration = .seconds(5), queryTimeout: Duration = .seconds(10)
    ) throws {
        try self.init(
            url: url, now: now, logger: logger, maximumConnections: maximumConnections,
            connectionTimeout: connectionTimeout, queryTimeout: queryTimeout, stamping: .serialized)
    }

    package init(
        url: String, now: @escaping @Sendable () -> Date, logger: Logger, maximumConnections: Int,
        connectionTimeout: Duration, queryTimeout: Duration, stamping: Stamping
    ) throws {
        let parsed = try DatabaseURL(parsing: url)
        var configuration = PostgresClient.Configuration(
            host: parsed.host, port: parsed.port, username: parsed.user, password: parsed.password,
            database: parsed.database, tls: parsed.tls.client)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = connectionTimeout
        // PostgreSQL itself cancels a statement that runs longer than a request may.
        configuration.options.additionalStartupParameters = [("statement_timeout", "\(queryTimeout.milliseconds)")]
        // The pool logs every failed connection attempt; the store says it once, with the reason.
        var poolLogger = logger
        poolLogger.logLevel = max(logger.logLevel, .warning)
        client = PostgresClient(configuration: configuration, backgroundLogger: poolLogger)
        probe = try parsed.connectionConfiguration()
        endpoint = parsed.endpoint
        self.now = now
        self.logger = logger
        self.connectionTimeout = connectionTimeout
        self.queryTimeout = queryTimeout
        self.stamping = stamping
        schemas = SchemaCache()
        joinedSet = nil
    }

    /// The store as an atomic set sees it: `base`'s pool and schemas, every statement on `set`'s connection.
    private init(joining set: PostgresHeldTransaction, of base: PostgresTableStore) {
        client = base.client
        probe = base.probe
        endpoint = base.endpoint
        now = base.now
        logger = base.logger
        stamping = base.stamping
        connectionTimeout = base.connectionTimeout
        queryTimeout = base.queryTimeout
        schemas = base.schemas
        joinedSet = set
    }

    /// Runs the connection pool until the service group shuts down.
    public func run() async throws {
        await client.run()
    }

    /// Waits until the database answers, retrying with backoff (0.25 s doubling to 4 s).
    ///
    /// - Parameter limit: How long to keep trying.
    /// - Throws: ``TableStoreError/unavailable(_:)`` naming the host and the last reason, after `limit`
    ///   (at once when the server itself refuses, for a wrong password or a missing database).
    public func waitUntilReachable(for limit: Duration) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(4))
        while true {
            let delay: Duration
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: probe, id: 0, logger: logger)
                try await connection.close()
                return
            } catch let error as PSQLError {
                if error.code == .server {  // a wrong password, a missing database: waiting will not help
                    throw TableStoreError.unavailable(
                        "PostgreSQL at \(endpoint) refused the connection: \(error.reason)")
                }
                delay = backoff.next()
                guard clock.now + delay < deadline else {
                    throw TableStoreError.unavailable(
                        "cannot reach PostgreSQL at \(endpoint) (tried for \(limit.seconds) s): \(error.reason)")
                }
                logger.notice("PostgreSQL at \(endpoint) is not reachable yet (\(error.reason)); retrying in \(delay)")
            }
            try await Task.sleep(for: delay)
        }
    }

    /// Runs `body` on a pooled connection, mapping database failures to ``TableStoreError``: data the
    /// database refuses is an invalid item for a write (`isWrite`), else an invalid query.
    ///
    /// Both waits are bounded, so every request is answered: the wait for a connection by `timeout`
    /// (while the database is down the pool keeps reconnecting in the background, and requests fail
    /// fast with `unavailable`, 503), and `body` by ``queryTimeout`` — PostgreSQL cancels a statement
    /// that runs longer (`statement_timeout`), and should a reply never come (a query written just as
    /// the database closed the connection waits forever in PostgresNIO), the connection is closed
    /// and the request answered 503 a moment later.
    func withConnection<T: Sendable>(
        timeout: Duration? = nil, queryTimeout: Duration? = nil, isWrite: Bool = false,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        if let held = joinedSet { return try await held.run(isWrite: isWrite, body, mapping: mapped) }
        let timeout = timeout ?? connectionTimeout
        let queryLimit = (queryTimeout ?? self.queryTimeout) + .seconds(1)
        // Decided once, so that a connection handed over just after the 503 never runs `body`.
        let lease = Locked(LeaseWait.waiting)
        do {
            return try await abandoning(
                after: timeout,
                unless: { lease.withLock { $0.end(.expired) } },
                throwing: { TableStoreError.unavailable("no database connection within \(timeout.seconds) s") }
            ) {
                try await self.client.withConnection { connection in
                    guard lease.withLock({ $0.end(.leased) }) else { throw CancellationError() }
                    // The lease is bounded by its own deadline from here.
                    return try await abandoning(
                        after: queryLimit,
                        throwing: { TableStoreError.unavailable("no answer from the database within \(queryLimit)") },
                        onTimeout: { connection.close().whenComplete { _ in } }
                    ) { try await body(connection) }
                }
            }
        } catch let error as TableStoreError {
            throw error
        } catch let error as PSQLError {
            throw mapped(error, isWrite: isWrite)
        } catch {
            // The pool failed the lease itself (its circuit breaker is open after a long outage).
            guard lease.withLock({ $0 }) == .leased else {
                throw TableStoreError.unavailable("the database is not reachable")
            }
            throw error
        }
    }

    /// A database failure as a store error (``storeError(_:isWrite:)``), logged when it is the database's.
    @Sendable func mapped(_ error: PSQLError, isWrite: Bool) -> any Error {
        let mapped = Self.storeError(error, isWrite: isWrite)
        if case .unavailable(let reason) = mapped as? TableStoreError {
            logger.warning("\(reason) (PostgreSQL: \(error.reason))")
        }
        return mapped
    }

    public var offersAtomicSets: Bool { true }

    public func atomically<T: Sendable>(_ body: @escaping @Sendable (any TableStore) async throws -> T) async throws
        -> T
    {
        if joinedSet != nil { return try await body(self) }
        // One transaction on one connection for the whole set, bounded as a whole; its statements run in it.
        let (value, published) = try await transaction(queryTimeout: atomicSetLimit(queryTimeout: queryTimeout)) {
            connection in
            let held = PostgresHeldTransaction(connection: connection, logger: self.logger)
            let value = try await body(PostgresTableStore(joining: held, of: self))
            return (value, held.publications.withLock { $0 })
        }
        for schema in published { schemas.publish(schema) }
        return value
    }

    /// Merges a schema this store's work committed into the cache; in an atomic set, holds it back until the set
    /// commits (a column a member of the set adds is not there when the set is undone).
    func publish(_ schema: TableSchema) {
        guard let joinedSet else { return schemas.publish(schema) }
        joinedSet.publications.withLock { $0.append(schema) }
    }

    /// Runs `body` in a transaction on a pooled connection (for writes and set-up); a thrown error
    /// rolls it back. `queryTimeout` replaces the store's for this transaction (set-up work). Inside an atomic set
    /// it is a savepoint of the set's transaction.
    func transaction<T: Sendable>(
        timeout: Duration? = nil, queryTimeout: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        if joinedSet != nil { return try await withConnection(isWrite: true, body) }
        let logger = self.logger
        return try await withConnection(timeout: timeout, queryTimeout: queryTimeout, isWrite: true) { connection in
            try await connection.query("BEGIN", logger: logger)
            if let queryTimeout {
                try await connection.query(
                    PostgresQuery(unsafeSQL: "SET LOCAL statement_timeout = \(queryTimeout.milliseconds)"),
                    logger: logger)
            }
            do {
                let result = try await body(connection)
                try await connection.query("COMMIT", logger: logger)
                return result
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// A database failure as a store error: bad data in a request is the client's (400), a lost or
    /// refused connection, a cancelled statement, a database shutting down is `unavailable` (503, in
    /// our words: the database's own text is for the log, not for clients); anything else is a
    /// server bug and stays as it is (500).
    static func storeError(_ error: PSQLError, isWrite: Bool) -> any Error {
        guard error.code == .server, let state = error.serverInfo?[.sqlState] else {
            return TableStoreError.unavailable("the database is not reachable")
        }
        switch state.prefix(2) {
        case "22" where state == "22003" && !isWrite:  // bigint out of range, in a filter's arithmetic
            return TableStoreError.invalidQuery(integerOverflowMessage)
        case "54" where state == "54001" && !isWrite:  // statement too complex (stack depth)
            return TableStoreError.invalidQuery(tooDeepMessage)
        case "22":  // data exception: overflow, a NUL character in text, …
            return isWrite ? TableStoreError.invalidItem(error.reason) : TableStoreError.invalidQuery(error.reason)
        case "57" where state == "57014":
            return TableStoreError.unavailable(queryTimeoutMessage)
        case "08", "57": return TableStoreError.unavailable("the connection to the database was lost")
        case "53": return TableStoreError.unavailable("the database is out of resources (connections, memory or disk)")
        case "40": return TableStoreError.unavailable("the write met another one at the same time; try again")
        default: return error
        }
    }
}

extension PSQLError {
    /// A short, password-free reason: the server's message, or what went wrong with the connection.
    var reason: String {
        if let message = serverInfo?[.message] { return message }
        if let failure = underlying as? NIOConnectionError {
            if let last = failure.connectionErrors.last { return "\(last.error)" }
            if let dns = failure.dnsAError ?? failure.dnsAAAAError { return "cannot resolve \(failure.host): \(dns)" }
        }
        if let underlying { return "\(underlying)" }
        return "\(code)"
    }
}

extension TableStoreError {
    /// The message of an `unavailable` error, else the description.
    var reason: String {
        if case .unavailable(let message) = self { return message }
        return description
    }
}

extension Duration {
    /// Whole seconds, for messages.
    var seconds: Int64 { components.seconds }
    /// Whole milliseconds, at least 1 (PostgreSQL's timeouts take milliseconds; 0 would mean none).
    var milliseconds: Int64 { max(1, components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000) }
}

/// How a lease's wait for its connection ended — once: the connection came, or the wait expired first.
private enum LeaseWait {
    case waiting, leased, expired

    /// Ends the wait as `outcome` unless it has ended already; whether it ended leased.
    mutating func end(_ outcome: LeaseWait) -> Bool {
        if self == .waiting { self = outcome }
        return self == .leased
    }
}
