public import GRDB
import SyncCore
public import SyncSQL

// GRDB support shared by the client's and the server's SQLite stores (a product for the server package, not API for apps).

public extension SQLValue {
    /// The value as GRDB binds it.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .bool(let bool): bool.databaseValue
        case .int(let int): int.databaseValue
        case .double(let double): double.databaseValue
        case .text(let text): text.databaseValue
        }
    }
}

public extension StatementArguments {
    /// Arguments for the parameters of translated SQL, in order.
    init(sqlValues: [SQLValue]) {
        self.init(sqlValues.map(\.databaseValue))
    }
}

/// Opens a WAL-mode pool on `path` that waits up to 10 s for a busy database instead of failing at once,
/// with the functions translated filters call.
///
/// - Parameters:
///   - path: The database file.
///   - prepare: Run on each connection as it opens, after the functions are added (e.g. a pragma).
/// - Throws: GRDB's `DatabaseError` when the file cannot be opened or is not a database.
public func openDatabasePool(path: String, prepare: (@Sendable (Database) throws -> Void)? = nil) throws
    -> DatabasePool
{
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    configuration.prepareDatabase { db in
        db.add(function: checkedIntegerSQLFunction)
        try prepare?(db)
    }
    return try DatabasePool(path: path, configuration: configuration)
}

/// Passes an integer (or null) through and fails on anything else: the result of integer arithmetic that
/// SQLite turned into a double because it left the 64-bit range. Filters translated for SQLite call it;
/// ``openDatabasePool(path:)`` registers it, other connections must (`db.add(function:)`).
public let checkedIntegerSQLFunction = DatabaseFunction(checkedIntegerFunction, argumentCount: 1, pure: true) {
    values in
    let value = values[0]
    switch value.storage {
    case .int64, .null: return value
    default: throw DatabaseError(resultCode: .SQLITE_ERROR, message: integerOverflowMessage)
    }
}
