import Foundation
import Logging
import SyncCore

/// The parts every sync runner shares: the local store, the transport, the store's account, the retries and their
/// clock, the logger and the wall clock. ``SyncContext`` makes them once per client.
struct SyncParts: Sendable {
    let store: SQLiteLocalStore
    let endpoint: TableEndpoint
    /// The store's account, which a pulled page or a resolution confirms in the transaction that keeps it.
    let account: AccountGuard
    let logger: Logger
    let retry: RetryPolicy
    /// Wall-clock time, for the last successful pull of each table.
    let now: @Sendable () -> Date
}

/// A runner of one job of a sync (``PushRunner``, ``PullRunner``, ``AttachmentTransfers``): it performs what its
/// plan value decides (``PushPlan``, ``PullPacing``, ``UploadPlan``, ``DownloadPlan``) with the shared parts.
protocol SyncRunner: Sendable {
    var parts: SyncParts { get }
}

extension SyncRunner {
    var store: SQLiteLocalStore { parts.store }
    var endpoint: TableEndpoint { parts.endpoint }
    var account: AccountGuard { parts.account }
    var logger: Logger { parts.logger }
    var retry: RetryPolicy { parts.retry }
    var now: @Sendable () -> Date { parts.now }
}

extension SyncRunner {
    /// Sends a request until its reply is not transient, waiting as ``Backoff/retries`` says
    /// (or the server's `Retry-After`, at most 60 s) between tries, at most `retry.limit` retries.
    ///
    /// - Parameters:
    ///   - logger: Where retries are logged.
    ///   - send: Sends the request once.
    ///   - isTransient: Whether a reply is worth another try (by default 5xx, 408 and 429); a transient
    ///     2xx counts as an unreadable reply.
    /// - Returns: The first reply that is not transient.
    /// - Throws: ``SyncStop``: unavailable after the last try, unauthorized on a 401, cancelled.
    func sendRetrying(
        logger: Logger, _ send: () async throws -> HTTPResponseData,
        isTransient: (HTTPResponseData) -> Bool = { isTransientStatus($0.status) }
    ) async throws -> HTTPResponseData {
        var attempt = 0
        while true {
            attempt += 1
            let reason: ServerUnavailableError.Reason
            var wait: Duration?
            do {
                let response = try await send()
                if response.status == 401 { throw SyncStop.unauthorized }
                if !isTransient(response) { return response }
                reason =
                    (200..<300).contains(response.status)
                    ? .unreadableReply(status: response.status) : .status(response.status)
                wait = response.header("Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                    .map { Duration.seconds(min(max($0, 0), 60)) }
            } catch let error as TransportError {
                if error.code == .cancelled { throw SyncStop.cancelled }
                reason = .noReply(error)
            }
            if Task.isCancelled { throw SyncStop.cancelled }
            guard attempt <= retry.limit else {
                throw SyncStop.unavailable(ServerUnavailableError(reason, attempts: attempt))
            }
            let delay = max(Backoff.retries.delay(attempt: attempt, jitter: retry.jitter()), wait ?? .zero)
            logger.info("Retrying a request", metadata: [SyncLogKey.attempt: "\(attempt)"])
            do { try await retry.clock.sleep(for: delay) } catch { throw SyncStop.cancelled }
        }
    }

    /// The server's current row of an item, tombstones included (PROTOCOL.md §5, §7).
    func fetchServerRow(_ table: TableName, _ id: ItemID, logger: Logger) async throws -> PushDecision.ServerRow {
        let url = endpoint.url(table, id: id, query: endpoint.wire.includeDeletedParameter)
        let reply = try await sendRetrying(logger: logger) {
            try await endpoint.send("GET", url, features: ["OL"])
        } isTransient: { reply in
            isTransientStatus(reply.status) || (reply.status == 200 && reply.item == nil)
        }
        if reply.status == 200, let item = reply.item { return .row(item) }
        return .absent
    }
}

extension SyncParts: SyncRunner {
    var parts: SyncParts { self }
}
