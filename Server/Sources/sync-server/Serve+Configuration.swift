import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import SyncServer
import UnixSignals

/// `serve`'s logging, its configuration from the options, the file and the environment, and its run until a signal.
extension Serve {
    /// Sends the process's logs to standard error as text, or as JSON lines (`--log-format json`).
    ///
    /// - Returns: Whether the logs are JSON.
    func bootstrapLogging() throws -> Bool {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        let json: Bool
        switch logFormat {
        case "text": json = false
        case "json": json = true
        default: throw ValidationError("--log-format must be text or json, not '\(logFormat)'")
        }
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, logLevel: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return json
    }

    /// The server's configuration from the options, the configuration file and the environment, checked.
    func serverConfiguration() throws -> SyncServerConfiguration {
        var configuration = SyncServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.checksAPIVersion = !skipVersionCheck
        configuration.acceptsVersionQueryForChanges = allowVersionQueryForChanges
        configuration.maxBodySize = maxBodySize
        configuration.attachments.maxSize = maxAttachmentSize
        configuration.attachments.directory = attachmentsDir
        configuration.attachments.maxUnfinishedUploads = maxUnfinishedUploads
        configuration.attachments.maxUnfinishedBytes = maxUnfinishedUploadBytes
        configuration.offersBatch = !noBatch
        configuration.compressionMinimumSize = noCompression ? nil : max(0, compressFrom)
        guard let consoleMode = ConsoleMode(rawValue: console) else {
            throw ValidationError("--console is auto, on or off, not '\(console)'")
        }
        configuration.console = consoleMode
        configuration.logger = Logger(label: "sync-server")
        let database = database ?? ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "sqlite:sync.sqlite"
        configuration.database = try DatabaseLocation(parsing: database)
        configuration.databaseWaitLimit = .seconds(max(0, databaseWait))
        try readLimits(into: &configuration)
        try readTables(into: &configuration)
        readFairShares(into: &configuration)
        guard afterCommitLease > 0 else { throw ConfigurationError("--after-commit-lease must be at least 1") }
        configuration.afterCommitLease = .seconds(afterCommitLease)
        if let auditLog {
            let log = try AuditLog(path: auditLog)
            for table in configuration.servedTables {
                configuration.hooks[table.name.rawValue, default: TableHooks()].afterCommit = log.append
            }
        }
        try configuration.validate()
        return configuration
    }

    /// The timeouts and limits, each at least 1.
    private func readLimits(into configuration: inout SyncServerConfiguration) throws {
        configuration.queryTimeout = try Self.duration(queryTimeout, "--query-timeout")
        configuration.connectionLimits.idleTimeout = try Self.duration(idleTimeout, "--idle-timeout")
        configuration.connectionLimits.headTimeout = try Self.duration(headTimeout, "--head-timeout")
        configuration.connectionLimits.bodyTimeout = try Self.duration(bodyTimeout, "--body-timeout")
        configuration.connectionLimits.responseTimeout = try Self.duration(responseTimeout, "--response-timeout")
        configuration.shutdownTimeout = try Self.duration(shutdownTimeout, "--shutdown-timeout")
        if let maxConnections { configuration.connectionLimits.maxConnections = maxConnections }
        configuration.connectionLimits.maxRequestLineLength = maxRequestLine
        configuration.connectionLimits.maxHeaderSize = maxHeaderSize
        configuration.queryLimits.maxOrderByKeys = maxOrderbyKeys
        configuration.queryLimits.maxFilterWork = maxFilterWork
        configuration.queryLimits.maxPageBytes = maxPageBytes
        for (value, name) in [
            (configuration.connectionLimits.maxConnections, "--max-connections"),
            (maxRequestLine, "--max-request-line"), (maxHeaderSize, "--max-header-size"),
            (maxBodySize, "--max-body-size"), (maxAttachmentSize, "--max-attachment-size"),
            (maxOrderbyKeys, "--max-orderby-keys"), (maxUnfinishedUploads, "--max-unfinished-uploads"),
            (maxUnfinishedUploadBytes, "--max-unfinished-upload-bytes"),
            (maxFilterWork, "--max-filter-work"), (maxPageBytes, "--max-page-bytes"),
        ] where value < 1 {
            throw ConfigurationError("\(name) must be at least 1")
        }
    }

    /// The fair shares' options, over the configuration file's (checked with the rest of the configuration).
    private func readFairShares(into configuration: inout SyncServerConfiguration) {
        if noFairShares { configuration.fairShares.isOn = false }
        if let perCallerRequests { configuration.fairShares.perCaller = perCallerRequests }
        if let perCallerQueue { configuration.fairShares.perCallerQueue = perCallerQueue }
        if let maxRunningRequests { configuration.fairShares.maxRunning = maxRunningRequests }
        if let maxQueuedRequests { configuration.fairShares.maxQueued = maxQueuedRequests }
        if let perCallerRate { configuration.fairShares.perCallerRate = perCallerRate }
    }

    /// The tables (`--table` and the configuration file's), the file's auth and CORS, and the HS256 secret of the
    /// environment (given in one place only).
    private func readTables(into configuration: inout SyncServerConfiguration) throws {
        configuration.tables = try tables.map { try TableConfiguration(name: $0) }
        if let config {
            let file = try ConfigurationFile(contentsOf: URL(fileURLWithPath: config))
            let named = Set(configuration.tables.map(\.name.canonical))
            if let clash = file.tables.first(where: { named.contains($0.name.canonical) }) {
                throw ConfigurationError("table '\(clash.name)' is given both by --table and in \(config)")
            }
            configuration.tables += file.tables
            configuration.auth = file.auth
            configuration.cors = file.cors
            if let shares = file.fairShares { configuration.fairShares = shares }
        }
        if let tombstoneRetention {
            guard tombstoneRetention >= 1 else { throw ConfigurationError("--tombstone-retention must be at least 1") }
            if configuration.tables.isEmpty { configuration.tables = [.todoItem] }  // what would be served
            for index in configuration.tables.indices
            where configuration.tables[index].softDelete && configuration.tables[index].tombstoneRetention == nil {
                configuration.tables[index].tombstoneRetention = .seconds(tombstoneRetention)
            }
        }
        if let secret = ProcessInfo.processInfo.environment[AuthConfiguration.secretVariable], !secret.isEmpty {
            if configuration.auth?.hs256Secret != nil {
                throw ConfigurationError(
                    "the HS256 secret is given both in \(config ?? "the configuration") and in $\(AuthConfiguration.secretVariable)"
                )
            }
            configuration.auth = configuration.auth ?? AuthConfiguration()
            configuration.auth?.hs256Secret = secret
        }
    }

    /// Runs the server until SIGTERM or SIGINT, then stops it gracefully: the server closes what is still open after
    /// `shutdownTimeout` (``SyncServerConfiguration/shutdownTimeout``), and anything else still running 5 s
    /// later is cancelled. A second signal ends the process at once, with status 143 (128 + SIGTERM).
    static func runUntilSignalled(_ app: some ApplicationProtocol & Service, shutdownTimeout: Duration) async throws {
        let logger = Logger(label: "sync-server")
        var group = ServiceGroupConfiguration(
            services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = shutdownTimeout + .seconds(5)
        // A last resort, never met in the tests: a service that ignores cancellation ends the process (not 0).
        group.maximumCancellationDuration = .seconds(5)
        // The service group traps both signals; these sources see them too, on one serial queue.
        let queue = DispatchQueue(label: "sync-server.signals")
        let signals = SignalCount()
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                signals.count += 1
                guard signals.count > 1 else { return }
                FileHandle.standardError.write(Data("sync-server: second signal, exiting now\n".utf8))
                Foundation.exit(143)
            }
            source.resume()
            sources.append(source)
        }
        defer { sources.forEach { $0.cancel() } }
        try await ServiceGroup(configuration: group).run()
    }

    /// Seconds given on the command line as a duration: more than 0 and at most an hour.
    static func duration(_ seconds: Double, _ name: String) throws -> Duration {
        guard seconds > 0, seconds <= 3600 else {
            throw ConfigurationError("\(name) must be more than 0 and at most 3600 seconds")
        }
        return .milliseconds(Int64(seconds * 1000))
    }
}
