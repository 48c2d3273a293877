import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A PostgreSQL server of a test's own, in a temporary directory, that the test can stop and start (the shared one of
/// `.ci/with-postgres` serves the other tests meanwhile). As root, PostgreSQL runs as the user `pgtest`, as in
/// `.ci/with-postgres`. Use ``withLocalPostgres(_:)``, which removes it however its body ends.
///
/// The server runs as a child process, not through `pg_ctl start`: a daemon started that way keeps the descriptors
/// through which the test would learn that `pg_ctl` exited.
public final class LocalPostgres: Sendable {
    public let directory: String
    public let port: Int
    let binaries: String
    private let server = NIOLockedValueBox<RunningProcess?>(nil)
    public var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    /// Where `initdb`, `pg_ctl` and `pg_isready` are: `pg_ctl`'s directory on PATH (links resolved), else
    /// Debian's newest `/usr/lib/postgresql/*/bin`.
    public static let binaryDirectory: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates =
            path.split(separator: ":").map(String.init)
            + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .sorted { $0.compare($1, options: .numeric) == .orderedDescending }.map { "/usr/lib/postgresql/\($0)/bin" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: "\($0)/pg_ctl") }.map {
            URL(fileURLWithPath: "\($0)/pg_ctl").resolvingSymlinksInPath().deletingLastPathComponent().path
        }
    }()

    /// Whether to run: where PostgreSQL is installed, and always in CI (where its absence fails the test).
    public static let isRequired: Bool = {
        if binaryDirectory != nil || ProcessInfo.processInfo.environment["CI"] != nil { return true }
        print("LocalPostgres: skipped: no pg_ctl on PATH or in /usr/lib/postgresql/*/bin")
        return false
    }()

    static var runAs: [String] { getuid() == 0 ? ["/usr/sbin/runuser", "-u", "pgtest", "--"] : [] }

    /// Creates the database cluster (initdb); nothing runs yet.
    ///
    /// - Throws: When PostgreSQL's binaries are missing or `initdb` fails.
    init() async throws {
        guard let binaries = Self.binaryDirectory else {
            throw ProcessError("PostgreSQL's binaries are missing (apt-get install postgresql)")
        }
        self.binaries = binaries
        port = try freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        if getuid() == 0 {
            _ = try? await runCommand("/usr/sbin/useradd", ["--create-home", "pgtest"])
            try await Self.run(["/bin/chown", "pgtest", directory])
        }
        try await Self.run(
            Self.runAs + ["\(binaries)/initdb", "-D", "\(directory)/db", "-A", "trust", "-U", "postgres"])
    }

    /// Starts the server and waits (up to 30 s) until it accepts connections.
    ///
    /// - Throws: When it ends or does not accept connections in time (with what it printed).
    public func start() async throws {
        let command =
            Self.runAs + [
                "\(binaries)/postgres", "-D", "\(directory)/db", "-h", "127.0.0.1", "-p", "\(port)", "-k", directory,
                "-c", "fsync=off",
            ]
        let process = await RunningProcess(command[0], Array(command.dropFirst()))
        server.withLockedValue { $0 = process }
        let deadline = ContinuousClock.now + .seconds(30)
        while (try? await Self.run(["\(binaries)/pg_isready", "-q", "-h", "127.0.0.1", "-p", "\(port)"])) == nil {
            guard !process.hasExited, ContinuousClock.now < deadline else {
                throw ProcessError("PostgreSQL did not start: \(process.printed)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// `pg_ctl stop` in its default (fast) mode: sessions are terminated, their transactions rolled back.
    ///
    /// - Throws: When `pg_ctl` fails.
    public func stop() async throws {
        try await Self.run(Self.runAs + ["\(binaries)/pg_ctl", "-D", "\(directory)/db", "-w", "-m", "fast", "stop"])
        _ = await server.withLockedValue({ $0 })?.exit()
        server.withLockedValue { $0 = nil }
    }

    /// Stops the server at once when it runs and deletes its files.
    func remove() async {
        if let process = server.withLockedValue({ $0 }) {
            _ = try? await Self.run(
                Self.runAs + ["\(binaries)/pg_ctl", "-D", "\(directory)/db", "-m", "immediate", "stop"])
            if await process.exitStatus(within: .seconds(10)) == nil { print("LocalPostgres: killed") }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a command to completion (60 s at most).
    ///
    /// - Throws: With its output when it fails.
    static func run(_ arguments: [String]) async throws {
        let result = try await runCommand(arguments[0], Array(arguments.dropFirst()), timeout: .seconds(60))
        guard result.status == 0 else {
            throw ProcessError(
                "\(arguments.joined(separator: " ")) exited \(result.status): \(result.output)\(result.error)")
        }
    }
}

/// Runs `body` with a PostgreSQL server of its own (created, not yet started), and removes it however `body` ends.
///
/// - Throws: When PostgreSQL cannot be set up, or what `body` throws.
public func withLocalPostgres<T>(_ body: (LocalPostgres) async throws -> T) async throws -> T {
    let postgres = try await LocalPostgres()
    return try await using(postgres, body) { await $0.remove() }
}
