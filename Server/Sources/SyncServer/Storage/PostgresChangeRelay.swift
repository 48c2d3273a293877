import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import SyncCore

/// Carries change notices between the `sync-server` instances that share one PostgreSQL database, so that a
/// `GET /changes` follower on one instance wakes for a write served by another (docs/changes.md).
///
/// Sending: the keys this instance's hub publishes are sent with `NOTIFY` on the channel ``channel``, as
/// `INSTANCE KEY` payloads, a batch of keys in one statement on a pooled connection — so under load many
/// writes cost one notice each in one round trip, and no request waits for it. Keys that cannot be sent (the
/// database is down) are kept and sent with the next batch.
///
/// Receiving: one connection of its own `LISTEN`s; each other instance's key wakes this hub's followers.
/// Whenever it starts listening — at startup and after a lost connection, when notices may have been
/// missed — every follower is woken (they pull, which costs one request when nothing changed).
///
/// It runs as a service after the store's pool, and ends on graceful shutdown.
final class PostgresChangeRelay: Service {
    static let channel = "sync_changes"

    let store: PostgresTableStore
    let hub: ChangeHub
    private let logger: Logger

    /// A relay for `hub`, which must be made `relaying`.
    init(store: PostgresTableStore, hub: ChangeHub) {
        precondition(hub.outgoing != nil, "the hub must relay")
        self.store = store
        self.hub = hub
        logger = store.logger
    }

    func run() async {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.send() }
                group.addTask { await self.listen() }
            }
        }
    }

    /// Sends the hub's published keys until cancelled.
    private func send() async {
        guard let outgoing = hub.outgoing else { return }
        let (channel, instance, logger) = (Self.channel, hub.instance, logger)
        var failing = false
        for await _ in outgoing {
            var keys = hub.takeOutgoing()
            while !keys.isEmpty {
                do {
                    let payloads = keys.map { "\(instance) \($0)" }
                    try await store.withConnection { connection in
                        let rows = try await connection.query(
                            "SELECT pg_notify(\(channel), p) FROM unnest(\(payloads)::text[]) AS p", logger: logger)
                        for try await _ in rows {}
                    }
                    if failing { logger.notice("Change notices reach the other instances again") }
                    failing = false
                    keys = []
                } catch {
                    if !failing {
                        logger.warning("Cannot send change notices to the other instances (retrying): \(error)")
                    }
                    failing = true
                    try? await Task.sleep(for: .seconds(1))
                    if Task.isCancelled { return }
                    keys.formUnion(hub.takeOutgoing())
                }
            }
        }
    }

    /// Listens for the other instances' keys until cancelled, reconnecting with backoff (0.25 s doubling to 4 s).
    private func listen() async {
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(4))
        var failing = false
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: store.probe, id: 1, logger: logger)
                // Closed, and the close awaited, on every path: a connection dropped open leaks (and stops a debug
                // build at PostgresNIO's assertion).
                do {
                    try await withTaskCancellationHandler {
                        try await connection.listen(on: Self.channel) { notices in
                            if failing { logger.notice("Listening for the other instances' changes again") }
                            failing = false
                            backoff.reset()
                            hub.receiveEverything()
                            for try await notice in notices {
                                let parts = notice.payload.split(separator: " ", maxSplits: 1)
                                guard parts.count == 2, parts[0] != hub.instance else { continue }
                                hub.receive(String(parts[1]))
                            }
                        }
                    } onCancel: {
                        connection.close().whenComplete { _ in }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                if Task.isCancelled { return }
                if !failing {
                    logger.warning(
                        "Not listening for the other instances' changes (retrying): \(String(reflecting: error))")
                }
                failing = true
            }
            try? await Task.sleep(for: backoff.next())
        }
    }
}
