public import SyncCore
public import SyncSQL

/// A table as the server knows it right now: its configuration plus every user column it has,
/// including those a dynamic schema added.
public struct TableSchema: Sendable, Hashable {
    /// The table's configuration.
    public var configuration: TableConfiguration
    /// The user columns (system properties excluded) and their types.
    public var columns: [String: SQLColumnType]

    /// Creates a schema.
    ///
    /// - Parameters:
    ///   - configuration: The table's configuration.
    ///   - columns: The user columns it has.
    public init(configuration: TableConfiguration, columns: [String: SQLColumnType]) {
        self.configuration = configuration
        self.columns = columns
    }

    /// The table's name.
    public var name: TableName { configuration.name }

    /// Whether columns are added as new fields arrive.
    public var isDynamic: Bool { configuration.columns == nil }

    /// Whether the table lacks `column`, which `purpose` (such as "a scoped table") needs as text: then the store adds
    /// it as text.
    ///
    /// - Throws: ``TableStoreError/unavailable(_:)`` when the table has the column as another type.
    func lacksTextColumn(_ column: String, for purpose: String) throws(TableStoreError) -> Bool {
        switch columns[column] {
        case nil: return true
        case .string?: return false
        case let type?:
            throw .unavailable(
                "table '\(name)' has a '\(column)' column of type \(type.rawValue); \(purpose) needs it as text")
        }
    }

    /// The column a `$filter`/`$orderby` field refers to: a system property, or a user column matched
    /// exactly, else case-insensitively when only one matches.
    ///
    /// - Parameter field: The field name.
    /// - Returns: The column, or nil for an unknown field.
    public func column(for field: String) -> SQLColumn? {
        if let system = SystemProperty(rawValue: field) { return Self.systemColumns[system] }
        if let type = columns[field] { return userColumn(field, type) }
        let matches = columns.filter { $0.key.lowercased() == field.lowercased() }
        guard matches.count == 1, let match = matches.first else { return nil }
        return userColumn(match.key, match.value)
    }

    /// A user column, with its collation.
    private func userColumn(_ name: String, _ type: SQLColumnType) -> SQLColumn {
        var column = SQLColumn(name: name, type: type)
        column.collation = configuration.collation(of: name)
        if column.collation != .binary { column.collationKeyColumn = TableConfiguration.collationKeyColumn(name) }
        return column
    }

    /// Whether `column` is a system property or one of the user columns.
    func knows(_ column: String) -> Bool {
        SystemProperty.isSystemProperty(column) || columns[column] != nil
    }

    /// The system properties as columns: never null.
    static let systemColumns: [SystemProperty: SQLColumn] = [
        .id: SQLColumn(name: "id", type: .string, isNullable: false),
        .createdAt: SQLColumn(name: "createdAt", type: .date, isNullable: false),
        .updatedAt: SQLColumn(name: "updatedAt", type: .date, isNullable: false),
        .version: SQLColumn(name: "version", type: .string, isNullable: false),
        .deleted: SQLColumn(name: "deleted", type: .bool, isNullable: false),
    ]
}
