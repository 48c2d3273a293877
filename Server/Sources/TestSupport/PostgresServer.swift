import Foundation
import SyncServer

/// The PostgreSQL server that `SYNC_TEST_POSTGRES_URL` names (`.ci/with-postgres` starts one).
public enum PostgresServer {
    public static let url: String? = ProcessInfo.processInfo.environment["SYNC_TEST_POSTGRES_URL"].flatMap {
        $0.isEmpty ? nil : $0
    }

    /// Whether to run: where a server is given, and always in CI (where its absence fails the test).
    public static let isRequired: Bool = {
        if url != nil { return true }
        if ProcessInfo.processInfo.environment["CI"] != nil { return true }
        print("PostgreSQL tests skipped: SYNC_TEST_POSTGRES_URL is not set (run `.ci/with-postgres swift test`)")
        return false
    }()

    /// Runs `body` with the URL of a fresh database, dropped afterwards.
    ///
    /// - Throws: ``Unavailable`` without `SYNC_TEST_POSTGRES_URL` (CI runs the tests through `.ci/with-postgres`);
    ///   what creating or dropping the database throws; what `body` throws.
    public static func withDatabase(_ body: (String) async throws -> Void) async throws {
        guard let server = url, var components = URLComponents(string: server) else { throw Unavailable() }
        let admin = try DatabaseURL(parsing: server)
        let name = "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await admin.execute("CREATE DATABASE \"\(name)\"")
        components.path = "/" + name
        do {
            guard let database = components.string else { throw Unavailable() }
            try await body(database)
        } catch {
            try? await admin.execute("DROP DATABASE \"\(name)\" WITH (FORCE)")
            throw error
        }
        try await admin.execute("DROP DATABASE \"\(name)\" WITH (FORCE)")
    }

    /// No PostgreSQL server is named (`SYNC_TEST_POSTGRES_URL`), or its URL is not one.
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String {
            "SYNC_TEST_POSTGRES_URL is not set or not a URL: CI runs the tests through .ci/with-postgres"
        }
    }
}
