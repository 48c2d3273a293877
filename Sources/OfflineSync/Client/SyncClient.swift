public import Foundation
public import Logging
import SyncCore
import SyncSQLite

/// The entry point of the SDK: a backend URL, a local store, and the sync tables on them.
///
/// Sync in five steps:
/// ```swift
/// struct TodoItem: Codable, Sendable {
///     var id: String
///     var text: String
///     var complete: Bool
///     var version: String?
/// }
/// let store = try SQLiteLocalStore(named: "todo")                         // 1. a local store
/// let client = SyncClient(url: URL(string: "http://127.0.0.1:8080")!, store: store)  // 2. a client
/// let todos = try client.syncTable("TodoItem", of: TodoItem.self)                   // 3. a sync table
/// try await todos.insert(TodoItem(id: UUID().uuidString, text: "Buy milk", complete: false))  // 4. work offline
/// try await todos.pull(queryID: "allTodoItems")                                 // 5. sync: push, then pull
/// ```
public final class SyncClient: Sendable {
    /// When a push sends its operations in batches (``Configuration/batchPush``).
    public enum BatchPush: Sendable, Hashable {
        /// Once the server has offered its batch endpoint in a response header (`sync-server` does on every
        /// table response, so no request is spent asking; the first operation of a new client's first push goes
        /// alone). Against a server that does not offer it (any Azure Mobile Apps backend) every operation is
        /// its own request.
        case whenOffered
        /// From the first operation, with limits of 100 operations and 1 MB, and atomic batches for change sets,
        /// until the server says its own. For a backend known to be `sync-server`; against another, the first batch
        /// is refused (one failed request) and the push goes on one operation per request.
        case always
        /// Never: every operation is its own request, as the v2 protocol has it.
        case never
    }

    /// Settings of a client, each with a default.
    public struct Configuration: Sendable {
        /// The dialect of the table protocol the backend speaks: ``ProtocolVersion/v2`` (Azure Mobile Apps) or
        /// ``ProtocolVersion/v3`` (Datasync). `sync-server` speaks both. Default: `.v2`. The client does not find
        /// it out by itself: a Datasync server answers a v2 request without saying which it speaks, and a v2
        /// server refuses a v3 one, so guessing would cost a failed request or a wrong reading.
        public var `protocol` = ProtocolVersion.v2
        /// How requests are sent. Default: `URLSessionTransport()`.
        public var transport: any HTTPTransport = URLSessionTransport()
        /// The user's token, asked before requests and again after a 401. Default: none (anonymous).
        public var tokenProvider: TokenProvider?
        /// Decides conflicts during a push. Default: none (a push with conflicts fails and parks them).
        public var conflictHandler: ConflictHandler?
        /// What a conflicting update does with a field both sides changed, by table name (any case): the field's
        /// ``FieldConflictPolicy``. Fields changed on one side only always merge by themselves; a table not named
        /// here surfaces both-sides changes as a conflict (then ``conflictHandler`` decides, if set).
        public var fieldConflicts: [String: FieldConflictPolicy] = [:]
        /// Rows of a pull's first page request. Default 1000 (the client follows a server's smaller page).
        public var pullPageSize = 1000
        /// The most rows a pull asks in one request: its pages grow from ``pullPageSize`` (by the ratio of the
        /// two times, 2 to 16 at once) while it waits for the network more than for the store (a slow or distant
        /// link, where each request costs a round trip), within the server's page size and `maxTop`. Bounds the
        /// memory a page takes: 10,000 rows by default, and the server bounds a page's bytes too. Set it to
        /// ``pullPageSize`` for pages of one size.
        public var maxPullPageSize = 10_000
        /// Whether a pull whose pages are as large as they may be, and which still waits for the network, asks
        /// two pages per round trip: the next one, and the one after it with `$skip` — used only when its first
        /// row is the next page's last, which proves no row fell between them (otherwise it is dropped and the
        /// pull goes on one page at a time). Two pages are then in memory at once. Default true; false sends one
        /// page request at a time (for a backend where `$skip` is costly).
        public var pullsAhead = true
        /// How long to wait for each response. Default 30 seconds.
        public var requestTimeout: Duration = .seconds(30)
        /// Where the SDK logs (trace: HTTP; debug: push and pull; info: retries and conflicts). Default: nowhere.
        public var logger = Logger(label: "OfflineSync", factory: { _ in SwiftLogNoOpLogHandler() })
        /// Makes ids for items inserted without one. Default: a lowercase UUID.
        public var makeID: @Sendable () -> String = { UUID().uuidString.lowercased() }
        /// How often a request of a push or a pull is tried again after a transient failure (no
        /// reply, a reply cut short or unreadable, 5xx, 408, 429), waiting 0.5 s, 1 s, 2 s … (±10%,
        /// or the server's `Retry-After`, at most 60 s) between tries. After the last, the push or
        /// pull stops with ``PushError/serverUnavailable(_:_:)`` or ``PullError/serverUnavailable(_:)`` (which carry
        /// the ``ServerUnavailableError``) and nothing is recorded against any operation.
        /// Default 3.
        public var retryLimit = 3
        /// The clock for waits between retries. Default: `ContinuousClock()`.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// The jitter factor of each retry delay, in 0.9...1.1. Default: random.
        public var jitter: @Sendable () -> Double = { Double.random(in: 0.9...1.1) }
        /// Whether a push sends many operations per request through the server's batch endpoint
        /// (docs/batch.md); each operation keeps its own answer, precondition and conflict. Default:
        /// ``BatchPush/whenOffered``. Under ``ProtocolVersion/v3`` pushes are never batched (the batch endpoint
        /// speaks v2).
        public var batchPush = BatchPush.whenOffered
        /// What a push does with a change set (``SyncClient/changeSet(_:)``) when the server does not offer atomic
        /// batches (docs/batch.md) — any backend but `sync-server`, the v3 dialect, or ``batchPush`` `.never`.
        /// Default: ``ChangeSetFallback/refuse``: a set is applied whole or waits.
        public var changeSetsWithoutAtomicServer = ChangeSetFallback.refuse
        /// Wall-clock time, recorded when a pull finishes (``SyncTable/lastSyncDate()``). Default: `Date()`.
        public var now: @Sendable () -> Date = { Date() }
        /// The account whose data the store holds, for tokens that do not name it (not a JWT with a `sub`
        /// claim). Default: nil — each token's `sub` is its account. A store belongs to the account of the
        /// first request sent with it; every later request must be for that account (``AccountError``), until
        /// ``SyncClient/signOut(pending:)``.
        public var accountID: String?
        /// The largest part of a file sent or asked for in one request: an upload or download cut short resumes from
        /// the last whole part (at most this much is sent again), and a part is all of a file the client holds in
        /// memory at once. Default 2 MiB (BENCHMARKS.md, "Attachments": larger parts grew memory, smaller ones cost
        /// throughput).
        public var attachmentChunkSize = 2 << 20
        /// The most bytes of downloaded (or already uploaded) files the store keeps; past it the least recently used
        /// are removed, and downloaded again when asked for. Files waiting to be uploaded are never removed and do
        /// not count. Default 512 MiB.
        public var attachmentCacheLimit = 512 << 20
        /// Called after each part of a file sent or received. Default: none.
        public var onTransferProgress: (@Sendable (TransferProgress) -> Void)?

        /// A configuration with every default.
        public init() {}
    }

    /// The backend.
    public let url: URL
    /// The local store (apps go through the tables and the client; the store's queue is theirs alone).
    let store: SQLiteLocalStore
    let context: SyncContext
    let endpoint: TableEndpoint
    /// The installation id and the account's checked token, which every request carries.
    let credentials: Credentials
    let configuration: Configuration
    /// What runs now and how the last sync ended, for ``status()``.
    let activity: SyncActivity
    /// The automatic sync, while it runs (``startSyncing(pulling:options:)``).
    let autoSyncer = Locked<AutoSyncer?>(nil)
    /// The table observations, which a sign-out finishes.
    let observers = ObserverRegistry()

    /// Creates a client on a store; nothing is read or sent until it is used, so a view model can
    /// create it at once. Operations sent by a previous run whose reply never came stay frozen and are
    /// sent again as they were.
    ///
    /// For example:
    /// ```swift
    /// let client = SyncClient(url: URL(string: "https://example.com")!, store: try SQLiteLocalStore(named: "todo"))
    /// ```
    /// - Parameters:
    ///   - url: The backend's base URL (tables are under `/tables`).
    ///   - store: The local store.
    ///   - configuration: Settings.
    public init(url: URL, store: SQLiteLocalStore, configuration: Configuration = Configuration()) {
        self.url = url
        self.store = store
        self.configuration = configuration
        activity = SyncActivity(now: configuration.now)
        credentials = Credentials(
            store: store, tokenProvider: configuration.tokenProvider, accountID: configuration.accountID)
        endpoint = TableEndpoint(
            baseURL: url, transport: configuration.transport, credentials: credentials,
            timeout: configuration.requestTimeout, logger: configuration.logger, wire: configuration.protocol.wire,
            batchOffer: BatchOffer(configuration.protocol.wire.batches ? configuration.batchPush : .never))
        context = SyncContext(
            store: store, endpoint: endpoint, account: credentials.account, logger: configuration.logger,
            conflictHandler: configuration.conflictHandler,
            fieldConflicts: Dictionary(
                configuration.fieldConflicts.map { ($0.key.lowercased(), $0.value) },
                uniquingKeysWith: { _, last in last }),
            changeSetFallback: configuration.changeSetsWithoutAtomicServer,
            retry: RetryPolicy(
                limit: configuration.retryLimit, clock: configuration.clock, jitter: configuration.jitter),
            now: configuration.now,
            attachments: AttachmentSettings(
                chunkSize: max(1, configuration.attachmentChunkSize), cacheLimit: configuration.attachmentCacheLimit,
                onProgress: configuration.onTransferProgress))
    }

    /// A table used offline: reads and writes go to the local store; push and pull sync it.
    ///
    /// For example:
    /// ```swift
    /// let todos = try client.syncTable("TodoItem", of: TodoItem.self)
    /// ```
    /// - Parameters:
    ///   - name: The table's name on the server: 1–128 letters, digits and `_`, starting with a letter.
    ///   - type: The item type (`JSONValue` for untyped items).
    /// - Returns: The sync table.
    /// - Throws: `ValueError` when `name` is not a valid table name, or when `Item` is `Identifiable` by an integer:
    ///   offline sync needs ids a device chooses (strings, PROTOCOL.md §1), as the original SDKs' offline tables did;
    ///   a table of integer ids the server gives is for ``table(_:of:)``.
    public func syncTable<Item: Codable & Sendable>(_ name: String, of type: Item.Type) throws -> SyncTable<Item> {
        let name = try TableName(name)
        try Self.refuseIntegerIDs(type, table: name)
        return SyncTable(name: name, client: self)
    }

    /// Refuses an item type `Identifiable` by an integer as a sync table's.
    static func refuseIntegerIDs<Item>(_ type: Item.Type, table: TableName) throws {
        func isInteger<T: Identifiable>(_: T.Type) -> Bool { T.ID.self is any BinaryInteger.Type }
        guard let identifiable = type as? any Identifiable.Type, isInteger(identifiable) else { return }
        throw ValueError(kind: "sync table \(table)", reason: SystemProperty.integerIDsReason)
    }

    /// A sync table whose rows name files (docs/attachments.md): `attachments` says which fields, and whether a pull
    /// downloads their files at once or the app asks for each (``SyncTable/file(for:field:progress:)``).
    ///
    /// For example:
    /// ```swift
    /// let inspections = try client.syncTable(
    ///     "Inspection", of: Inspection.self, attachments: AttachmentPolicy(fields: ["photo"], download: .afterPull))
    /// ```
    /// - Parameters:
    ///   - name: The table's name on the server.
    ///   - type: The item type (`JSONValue` for untyped items).
    ///   - attachments: The fields that name files, and when to download them.
    /// - Returns: The sync table.
    /// - Throws: `ValueError` when `name` is not a valid table name, or `Item` is `Identifiable` by an integer (see
    ///   ``syncTable(_:of:)``).
    public func syncTable<Item: Codable & Sendable>(
        _ name: String, of type: Item.Type, attachments: AttachmentPolicy
    ) throws -> SyncTable<Item> {
        let name = try TableName(name)
        try Self.refuseIntegerIDs(type, table: name)
        return SyncTable(name: name, client: self, attachmentPolicy: attachments)
    }

    /// A sync table of untyped items (see ``syncTable(_:of:)``).
    ///
    /// - Parameter name: The table's name on the server.
    /// - Returns: The sync table.
    /// - Throws: `ValueError` when `name` is not a valid table name.
    public func syncTable(_ name: String) throws -> SyncTable<JSONValue> {
        try syncTable(name, of: JSONValue.self)
    }

    /// A table used online only: every call is a request; the local store is not touched. Its ids may be strings
    /// or the integers a server gives (a table of integer ids: `Item`'s `id` an `Int`, 0 or nil for a new item).
    ///
    /// - Parameters:
    ///   - name: The table's name on the server.
    ///   - type: The item type (`JSONValue` for untyped items).
    /// - Returns: The online table.
    /// - Throws: `ValueError` when `name` is not a valid table name.
    public func table<Item: Codable & Sendable>(_ name: String, of type: Item.Type) throws -> RemoteTable<Item> {
        RemoteTable(name: try TableName(name), endpoint: endpoint)
    }

    /// This installation's id: created in the store on first use, and sent as `X-ZUMO-INSTALLATION-ID`.
    ///
    /// - Returns: The id (a UUID).
    /// - Throws: ``LocalStoreError`` when the store cannot be read or written.
    public func installationID() async throws -> String {
        try await credentials.installationID.value()
    }

    /// Pushes every pending operation of every table, in queue order.
    ///
    /// - Returns: What was pushed.
    /// - Throws: ``PushError`` when the server refused operations or could not be reached; ``AccountError`` when
    ///   the token is for another account than the store's (nothing sent). Every operation not pushed stays
    ///   queued.
    @discardableResult
    public func push() async throws -> PushResult {
        try await activity.push { try await context.push() }
    }

    /// The queued local changes, in push order.
    ///
    /// - Returns: The pending operations.
    /// - Throws: ``LocalStoreError``.
    public func pendingOperations() async throws -> [PendingOperation] {
        try await store.read { try $0.operations(after: nil, limit: nil) }
    }

    /// The files waiting to be uploaded by the next push, in the order attached (docs/attachments.md), with those the
    /// server refused for good.
    ///
    /// - Returns: The files.
    /// - Throws: ``LocalStoreError``.
    public func pendingAttachments() async throws -> [PendingAttachment] {
        try await store.read { reader in
            try reader.allAttachments().filter(\.pending).map {
                PendingAttachment(
                    attachment: Attachment(hash: $0.hash, size: $0.size), table: $0.table, refusal: $0.failure)
            }
        }
    }

    /// The operations the server refused, until they are resolved or pushed.
    ///
    /// - Returns: The errors, in queue order.
    /// - Throws: ``LocalStoreError``.
    public func operationErrors() async throws -> [OperationError] {
        try await store.read { try $0.operationErrors() }
    }

    /// Resolves a refused operation: take the server's item, discard, keep mine and retry, change
    /// the kind, or leave it (PROTOCOL.md §7). Taking the server's item and discarding store the
    /// server's copy and then fetch the item's current row from the server; when the server cannot
    /// be reached, the next pull of the table fetches it (the need is kept in the store).
    ///
    /// - Parameters:
    ///   - error: The error, from ``operationErrors()`` or a ``PushError``.
    ///   - resolution: What to do.
    /// - Throws: ``ResolutionError`` when the operation is no longer queued; ``LocalStoreError``.
    ///   Cancellation stops only the fetch of the current row, which the next pull makes.
    public func resolve(_ error: OperationError, with resolution: ConflictResolution) async throws {
        if try await context.pusher.resolve(error, with: resolution) {
            try? await context.puller.refetchMarked(in: error.operation.table)
        }
    }
}
