import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import SyncServer
import UnixSignals

/// The end-to-end test server of the Azure Mobile Apps Node.js SDK (its `e2etest/`: tables, seed, scripted table and
/// custom APIs), written on the `SyncServer` library, so that the clients' end-to-end suites can run against us.
@main
struct E2EServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e-server",
        abstract: "The Azure Mobile Apps end-to-end test server, on the SyncServer library.",
        discussion: """
            Serves the tables of the Node.js SDK's e2etest server (authenticated, public, blog_posts, blog_comments, \
            dates, movies with its 248 seeded movies, OfflineReady, OfflineReadyNoVersionAuthenticated, \
            StringIdRoundTripTableSoftDelete, roundTripTable), the scripted ParamsTestTable, and the APIs \
            runtimeInfo, jwtTokenGenerator, applicationPermission, publicPermission, userPermission, adminPermission \
            and movieFinder. Tokens are HS256, signed with the --config file's secret or $SYNC_SERVER_SECRET (a \
            development secret otherwise); /api/jwtTokenGenerator hands one out.
            """)

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks any free port.")
    var port = 3000

    @Option(help: "sqlite:PATH or a postgres:// URL.")
    var database = "sqlite:e2e.sqlite"

    @Option(help: "A sync-server configuration file: its auth and cors are used, its tables added.")
    var config: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else { throw ValidationError("--log-level: \(logLevel)?") }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var configuration = SyncServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.logger = Logger(label: "e2e-server")
        do {
            configuration.database = try DatabaseLocation(parsing: database)
            let file = try config.map { try ConfigurationFile(contentsOf: URL(fileURLWithPath: $0)) }
            configuration.auth = file?.auth ?? AuthConfiguration()
            configuration.cors = file?.cors
            if configuration.auth?.hs256Secret == nil, configuration.auth?.jwksFile == nil {
                let secret = ProcessInfo.processInfo.environment[AuthConfiguration.secretVariable]
                configuration.auth?.hs256Secret = secret.flatMap { $0.isEmpty ? nil : $0 } ?? E2E.developmentSecret
            }
            try E2E.configure(&configuration)
            configuration.tables += file?.tables ?? []
            try configuration.validate()
        } catch let error as ConfigurationError {
            throw ValidationError(error.message)
        }
        let host = self.host
        let app = try await buildApplication(configuration) { port in
            FileHandle.standardOutput.write(Data("listening on http://\(host):\(port)\n".utf8))
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint],
                logger: configuration.logger))
        try await group.run()
    }
}
