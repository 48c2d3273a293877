public import Foundation
public import SyncCore

/// Moving an app from the retired Azure Mobile Apps iOS SDK without losing what its users did offline: reads the
/// SQLite file that Core Data wrote for `MSCoreDataStore` — without Core Data, so it runs on Linux too — and carries
/// its rows, its queue of pending operations (in their order), its parked operation errors and its incremental-pull
/// positions into a new ``SQLiteLocalStore``, with ``SQLiteLocalStore/importAzureMobileAppsStore(at:tables:)``.
///
/// The old store's layout is Core Data's: one table `Z<ENTITY>` per entity, a column `Z<ATTRIBUTE>` per attribute
/// (upper-cased, which is why each table's fields are named here with their JSON spelling and type), dates as
/// seconds since 2001-01-01, booleans as integers; the SDK's own entities are `MS_TableOperations`,
/// `MS_TableOperationErrors` and `MS_TableConfig`. System columns are found under either of the SDK's names: `version`,
/// `createdAt`, `updatedAt`, `deleted` (SDK 3), or `ms_version`, `ms_createdAt`, `ms_updatedAt`, `ms_deleted` (SDK 2).
public enum AzureMobileAppsImport {
    /// How a Core Data attribute becomes a field of the imported item.
    public enum FieldType: Sendable, Hashable {
        /// `String`: a JSON string.
        case string
        /// `Integer 16`, `32` or `64`: a JSON integer.
        case integer
        /// `Double`, `Float` or `Decimal`: a JSON number.
        case number
        /// `Boolean` (stored as 0 or 1): `true` or `false`.
        case boolean
        /// `Date` (stored as seconds since 2001-01-01): an ISO 8601 string with milliseconds, as the SDK sent dates.
        case date
        /// `Binary Data`: a base64 string.
        case binary
        /// An attribute the app no longer syncs: left out of the item.
        case skip
    }

    /// A table to import: the Core Data entity of the same name (the old SDK used the table's name as the entity's).
    public struct Table: Sendable, Hashable {
        /// The table's (and entity's) name.
        public var name: String
        /// The entity's attributes besides `id` and the system columns, by the name the item's JSON uses
        /// (`complete`, `dueDate`), with how to read each.
        public var fields: [String: FieldType]

        /// Creates a table to import.
        ///
        /// For example, the tutorial's:
        /// ```swift
        /// AzureMobileAppsImport.Table("TodoItem", fields: ["text": .string, "complete": .boolean])
        /// ```
        /// - Parameters:
        ///   - name: The table's name, which is the Core Data entity's.
        ///   - fields: The attributes besides `id` and the system columns, with their types.
        public init(_ name: String, fields: [String: FieldType]) {
            self.name = name
            self.fields = fields
        }
    }

    /// An incremental-pull position carried over: the next pull with this query id asks only for rows updated at or
    /// after `since`, as the old SDK's next pull would have.
    public struct Position: Sendable, Hashable, Codable {
        /// The table.
        public var table: String
        /// The query id.
        public var queryID: String
        /// The old SDK's delta token: the greatest `updatedAt` it had applied.
        public var since: WireDate
    }

    /// What an import carried.
    public struct Summary: Sendable, Hashable, Codable {
        /// The old store's identity (Core Data's `Z_UUID`).
        public var storeUUID: String
        /// Rows imported, by table.
        public var rows: [String: Int]
        /// Rows the old store held as deleted (`deleted` true) without a pending operation: left out, as a pull
        /// would have removed them.
        public var deletedRowsLeftOut: Int
        /// Pending operations, by kind, in their order in the queue.
        public var operations: [OperationKind: Int]
        /// Parked operation errors carried (conflicts and refusals, with the server's item where the SDK kept one).
        public var errors: Int
        /// Errors not carried: those without an HTTP status, or with a transient one (408, 429, 5xx); their
        /// operations are simply pushed again.
        public var errorsLeftOut: Int
        /// Incremental-pull positions carried.
        public var positions: [Position]
        /// True when the store had imported this very file before: nothing was written this time, and the other
        /// figures are those of the first import.
        public var alreadyImported: Bool

        /// The number of pending operations carried.
        public var operationCount: Int { operations.values.reduce(0, +) }
    }

    /// Why an import was refused. Nothing was written to the new store, and the old file is never written.
    public struct ImportError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The kind of refusal.
        public enum Code: Sendable, Hashable {
            /// The file is not an SQLite file, or not one that Core Data wrote for the Azure Mobile Apps SDK.
            case notAStore
            /// The file is damaged: SQLite cannot read it whole.
            case damaged
            /// The model is not one the import understands as told: an entity or attribute missing, a column not
            /// named, an operation on a table not named, a value of another type, an id the SDK accepted and the
            /// server would not.
            case unsupportedModel
            /// The new store holds data already (rows, operations, errors or positions): import into a new store.
            case storeNotEmpty
            /// The new store holds the import of another old store.
            case otherStoreImported
        }

        /// The kind of refusal.
        public var code: Code
        /// What was wrong, in one sentence.
        public var message: String

        /// The message.
        public var description: String { message }
    }
}

extension SQLiteLocalStore {
    static let azureImportKey = "import.azureMobileApps"

    /// Imports the Core Data store of the Azure Mobile Apps iOS SDK at `url` (see ``AzureMobileAppsImport``) into this
    /// store, in one transaction: the rows of `tables`, every pending operation in its order (inserts and updates push
    /// the row as it is, deletes the item the SDK kept, with its `version`), parked errors with their server items,
    /// and the `MS_TableConfig` positions, so that the first pull of each imported query id is incremental. The old
    /// file (and its `-wal`) is copied and the copy read: it is never written. The copy is made beside this store, in
    /// `<store file>-import/`, and removed when the import ends; one that a killed process left is removed by the
    /// next open of the store, the next import or a sign-out. Run it once, before the first sync,
    /// into a new store; running it again with the same file changes nothing.
    ///
    /// For example, at the first launch after the update:
    /// ```swift
    /// let old = URL(fileURLWithPath: documents + "/QSTodoDataModel.sqlite")
    /// if FileManager.default.fileExists(atPath: old.path) {
    ///     let summary = try await store.importAzureMobileAppsStore(
    ///         at: old, tables: [.init("TodoItem", fields: ["text": .string, "complete": .boolean])])
    ///     print("\(summary.operationCount) changes carried over")
    /// }
    /// ```
    /// - Parameters:
    ///   - url: The old store's SQLite file.
    ///   - tables: The tables to import, with their fields; every table with pending operations must be named.
    /// - Returns: What was carried (or, for a file imported before, what its first import carried).
    /// - Throws: ``AzureMobileAppsImport/ImportError`` when the file is not such a store, is damaged, has a model the
    ///   import does not understand, or when this store is not new; ``LocalStoreError`` when this store cannot be
    ///   written. In every case nothing was written. Cancellation before the write throws `CancellationError` and
    ///   writes nothing; once the write has begun it completes.
    public func importAzureMobileAppsStore(at url: URL, tables: [AzureMobileAppsImport.Table]) async throws
        -> AzureMobileAppsImport.Summary
    {
        let database = databasePath
        let snapshot = try await offCooperativeThreads {
            try AzureStoreReader.read(url, tables: tables, beside: database)
        }
        try Task.checkCancellation()
        return try await write { writer in try snapshot.write(into: writer) }
    }
}
