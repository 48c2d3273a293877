import Foundation
import SyncCore
import SyncOData

/// The device-side database: table rows, the ordered queue of pending operations, their errors, and
/// the pull cursors: the engine's one seam to its storage, read and written through ``LocalStoreReader`` and
/// ``LocalStoreWriter``. `SQLiteLocalStore` is the one conformer; the role lets tests wrap it to inject faults. Every
/// local change runs in one `write(_:)` transaction, so a crash leaves the row and the queue both changed or both
/// unchanged.
protocol LocalStore: Sendable {
    /// Runs `body` in one write transaction: all its changes are kept, or none if it throws.
    ///
    /// - Parameter body: The work, given a writer valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, or a store failure.
    func write<T: Sendable>(_ body: @escaping @Sendable (LocalStoreWriter) throws -> T) async throws -> T

    /// Runs `body` on a consistent snapshot.
    ///
    /// - Parameter body: The work, given a reader valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, or a store failure.
    func read<T: Sendable>(_ body: @escaping @Sendable (LocalStoreReader) throws -> T) async throws -> T

    /// Runs `body` while this client holds the store's push lock: one push at a time per store, across
    /// every client and process that opened it, so that two pushes never send the same operation.
    /// Waits while another holder has it. The lock is let go when `body` ends, and by the system when
    /// the process dies.
    ///
    /// - Parameter body: The push.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, ``LocalStoreError`` when the lock cannot be taken, or
    ///   `CancellationError` when the task is cancelled while waiting (the lock was not taken).
    func withPushLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T

    /// The folder of the files attached to rows (made when first needed).
    var attachmentDirectory: URL { get }

    /// Erases everything the store holds — every table's rows, the queue, operation errors, cursors, items to
    /// fetch again, settings and attached files — so that no byte of it is left in the store's files. `check` runs first, in
    /// the same transaction: what it throws stops the erase with nothing erased.
    ///
    /// - Parameter check: Reads the store before it is erased (a sign-out refuses while changes wait).
    /// - Throws: What `check` throws; ``LocalStoreError`` when the store cannot be erased.
    func erase(after check: @escaping @Sendable (LocalStoreReader) throws -> Void) async throws

    /// Observes what `fetch` reads from `tables`: emits its value at once, then again after each committed
    /// change to those tables whose result differs from the last one emitted (changes to other tables, or ones
    /// that leave the result as it was, emit nothing). Quick commits may be merged into one value; the last
    /// value always reflects the last commit.
    ///
    /// - Parameters:
    ///   - tables: The sync tables `fetch` reads (made ready to be observed even before their first row).
    ///   - fetch: Reads the value, on a consistent snapshot.
    /// - Returns: The values, until the consumer stops iterating (or its task is cancelled); the stream
    ///   finishes with ``LocalStoreError`` when the store fails, or with what `fetch` throws.
    func observe<T: Sendable & Equatable>(
        _ tables: [TableName], _ fetch: @escaping @Sendable (LocalStoreReader) throws -> T
    ) -> AsyncThrowingStream<T, any Error>
}
