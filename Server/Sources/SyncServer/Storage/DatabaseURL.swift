public import Foundation
package import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// The parts of a `postgres://USER:PASS@HOST:PORT/DB?sslmode=…` URL (package-internal: the store,
/// `sync-bench` and the tests read URLs the same way).
package struct DatabaseURL: Sendable {
    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String?
    var tls: TLSMode

    /// libpq's `sslmode`, as far as PostgresNIO goes.
    enum TLSMode {
        case disable, prefer, require

        var client: PostgresClient.Configuration.TLS {
            switch self {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
        }

        func connection() throws -> PostgresConnection.Configuration.TLS {
            switch self {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        }
    }

    /// `host:port/database`, for messages (never the password).
    var endpoint: String { "\(host):\(port)/\(database ?? "")" }

    /// The configuration of a single connection to this database.
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        try PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls.connection())
    }

    /// Runs SQL statements on one connection of their own (set-up and tear-down work, not requests).
    package func execute(_ statements: String..., logger: Logger = .silent) async throws {
        try await withOwnConnection(logger: logger) { connection in
            for sql in statements { try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
        }
    }

    /// Runs one query on a connection of its own and returns its rows, each as the JSON text of an object (for
    /// diagnostics: what the database's sessions are doing).
    package func rows(_ sql: String, logger: Logger = .silent) async throws -> [String] {
        try await withOwnConnection(logger: logger) { connection in
            var texts: [String] = []
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT row_to_json(r)::text FROM (\(sql)) AS r"), logger: logger)
            for try await text in rows.decode(String.self) { texts.append(text) }
            return texts
        }
    }

    /// Runs `body` on a new connection, closed (and the close awaited) whatever `body` does.
    private func withOwnConnection<T>(logger: Logger, _ body: (PostgresConnection) async throws -> T) async throws
        -> T
    {
        let connection = try await PostgresConnection.connect(
            configuration: try connectionConfiguration(), id: 0, logger: logger)
        let result: T
        do {
            result = try await body(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        return result
    }

    /// Reads a URL.
    ///
    /// - Parameter url: `postgres://USER:PASS@HOST:PORT/DB`, optionally with `?sslmode=…`.
    /// - Throws: ``ConfigurationError`` for any other form.
    package init(parsing url: String) throws {
        let usage = "the database URL must look like postgres://USER:PASS@HOST:PORT/DB"
        guard let components = URLComponents(string: url),
            components.scheme == "postgres" || components.scheme == "postgresql",
            let host = components.host, !host.isEmpty
        else { throw ConfigurationError(usage) }
        guard let user = components.percentEncodedUser?.removingPercentEncoding, !user.isEmpty else {
            throw ConfigurationError("\(usage): the user is missing")
        }
        self.host = host
        self.user = user
        password = components.percentEncodedPassword?.removingPercentEncoding
        port = components.port ?? 5432
        let database = String(components.path.drop(while: { $0 == "/" })).removingPercentEncoding ?? ""
        self.database = database.isEmpty ? nil : database
        switch components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer
        case "require": tls = .require
        case let other: throw ConfigurationError("sslmode '\(other)' is not supported; use disable, prefer or require")
        }
    }
}
