import Logging
import PostgresNIO
import SyncSQLite

/// The transaction of an atomic set of writes (``PostgresTableStore/atomically(_:)``): its connection, on which the
/// store runs the set's statements, each piece of work in a savepoint (a failure undoes that piece's statements
/// only, as the rollback of its own transaction would, and leaves the transaction usable).
struct PostgresHeldTransaction: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    /// The schemas the set's writes published, held back until it commits (``PostgresTableStore/publish(_:)``).
    let publications = Locked<[TableSchema]>([])

    func run<T: Sendable>(
        isWrite: Bool, _ body: @Sendable (PostgresConnection) async throws -> T,
        mapping: (PSQLError, Bool) -> any Error
    ) async throws -> T {
        do {
            try await connection.query("SAVEPOINT \"set_member\"", logger: logger)
            do {
                let value = try await body(connection)
                try await connection.query("RELEASE \"set_member\"", logger: logger)
                return value
            } catch {
                _ = try? await connection.query("ROLLBACK TO \"set_member\"", logger: logger)
                throw error
            }
        } catch let error as PSQLError {
            throw mapping(error, isWrite)
        }
    }
}
