/// A `sync-server` process (or another server product that takes its options) on 127.0.0.1, for tests and tools
/// that start, signal, kill and restart real servers: a ``RunningProcess`` that has said it listens.
///
/// Prefer ``withServerProcess(port:database:options:product:environment:_:)``, which stops it however its body ends.
public final class ServerProcess: Sendable {
    public let port: Int
    /// The process, to signal, stop or kill it.
    public let process: RunningProcess

    /// Starts `product` on `port` and waits (up to `startTimeout`) for its `listening on` line. The wait is a hang
    /// guard: in the whole suite on two cores `e2e-server` on PostgreSQL (which loads its sample rows first) took
    /// over 20 s to say it listens (2026-11-29).
    ///
    /// - Parameters:
    ///   - port: The port.
    ///   - database: `sqlite:PATH` or a `postgres://` URL.
    ///   - options: More command-line options.
    ///   - product: The server's executable (a product name next to the test binary, or a path).
    ///   - environment: Variables set over this process's own environment.
    ///   - logLevel: Its `--log-level`.
    /// - Throws: When it does not say it listens in time (it is stopped first).
    public init(
        port: Int, database: String, options: [String] = [], product: String = "sync-server",
        environment: [String: String] = [:], logLevel: String = "warning", startTimeout: Duration = .seconds(60)
    ) async throws {
        self.port = port
        process = await RunningProcess(
            product.contains("/") ? product : Products.path(product),
            ["--port", String(port), "--database", database, "--log-level", logLevel] + options,
            environment: environment)
        guard await process.waitForOutput(containing: "listening on http://127.0.0.1:\(port)", within: startTimeout)
        else {
            await process.stop()
            throw ProcessError("\(product) did not start on port \(port): \(process.printed)")
        }
    }

    /// Sends `number` (SIGTERM, SIGINT, …), unless it has ended.
    public func signal(_ number: Int32) { process.signal(number) }

    /// See ``RunningProcess/exitStatus(within:)``.
    public func exitStatus(within limit: Duration) async -> Int32? { await process.exitStatus(within: limit) }

    /// See ``RunningProcess/terminate(within:)``.
    public func terminate(within limit: Duration) async -> Duration? { await process.terminate(within: limit) }

    /// Stops it: SIGTERM, then SIGKILL if it has not ended within 30 s; returns once it has ended.
    public func stop() async { await process.stop() }

    /// SIGKILL, no chance to finish anything; returns once it has ended.
    public func kill() async { await process.kill() }
}

/// Runs `body` with a server process started as ``ServerProcess/init(port:database:options:product:environment:logLevel:startTimeout:)``
/// does, and stops it (SIGTERM, SIGKILL after 30 s) however `body` ends.
public func withServerProcess<T>(
    port: Int, database: String, options: [String] = [], product: String = "sync-server",
    environment: [String: String] = [:], _ body: (ServerProcess) async throws -> T
) async throws -> T {
    let server = try await ServerProcess(
        port: port, database: database, options: options, product: product, environment: environment)
    return try await using(server, body) { await $0.stop() }
}

/// A process that did not do what a test needs of it.
public struct ProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
