import Foundation
import SyncSQLite

/// Who is waiting for which tables to change, for the `GET /changes` long poll (docs/changes.md). Each committed
/// write publishes its key — the table, or the table and owner of a per-user table's row — and wakes the
/// requests that follow that key. A token is this instance's id and its change counter: a request with a token
/// of another instance (or of this one before a restart) is answered at once with every table it follows, so
/// that nothing is missed behind a load balancer; the client then pulls, which is cheap when nothing changed.
///
/// Instances that share one database tell each other of their writes through a relay
/// (``PostgresChangeRelay``): a hub made `relaying` queues the keys it publishes in ``outgoing``, and the
/// relay hands it the other instances' keys with ``receive(_:)``.
final class ChangeHub: Sendable {
    private struct Waiter {
        let keys: Set<String>
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var generation: UInt64 = 0
        var lastChange: [String: UInt64] = [:]
        /// The generation at which every key counts as changed (the relay may have missed notices).
        var everything: UInt64 = 0
        var waiters: [UUID: Waiter] = [:]
        /// Published keys the relay has not sent yet.
        var outgoing: Set<String> = []

        func changed(_ key: String, after since: UInt64) -> Bool {
            max(lastChange[key] ?? 0, everything) > since
        }
    }

    /// This instance, in tokens.
    let instance = String(UUID().uuidString.lowercased().prefix(8))
    private let state = Locked(State())
    /// Yields after ``publish(_:)`` queued keys for the relay (nil when the hub does not relay).
    let outgoing: AsyncStream<Void>?
    private let outgoingSignal: AsyncStream<Void>.Continuation?

    /// A hub; `relaying` queues every published key for a relay to send to other instances.
    init(relaying: Bool = false) {
        if relaying {
            let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            (outgoing, outgoingSignal) = (stream, continuation)
        } else {
            (outgoing, outgoingSignal) = (nil, nil)
        }
    }

    /// Notes a committed change of `key` on this instance, wakes whoever follows it here, and queues it for
    /// the other instances when the hub relays.
    func publish(_ key: String) {
        wake(key, relayed: outgoingSignal != nil)
        outgoingSignal?.yield()
    }

    /// Notes a change of `key` that another instance committed, and wakes whoever follows it here.
    func receive(_ key: String) {
        wake(key, relayed: false)
    }

    /// Notes that any key may have changed (the relay was not listening for a while), and wakes everyone.
    func receiveEverything() {
        let woken = state.withLock { state in
            state.generation += 1
            state.everything = state.generation
            defer { state.waiters = [:] }
            return state.waiters.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// The keys published since the last call, for the relay to send.
    func takeOutgoing() -> Set<String> {
        state.withLock { state in
            defer { state.outgoing = [] }
            return state.outgoing
        }
    }

    private func wake(_ key: String, relayed: Bool) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation += 1
            state.lastChange[key] = state.generation
            if relayed { state.outgoing.insert(key) }
            let ids = state.waiters.filter { $0.value.keys.contains(key) }.map(\.key)
            return ids.compactMap { state.waiters.removeValue(forKey: $0)?.continuation }
        }
        for continuation in woken { continuation.resume() }
    }

    /// The keys among `keys` that changed after `token`, with the token to send next; every key for a token
    /// this instance did not give (or nil for no token: nothing changed, only the token).
    func changes(_ keys: Set<String>, since token: String?) -> (changed: Set<String>, token: String) {
        state.withLock { state in
            let now = "\(instance).\(state.generation)"
            guard let token else { return ([], now) }
            guard let since = Self.generation(token, instance: instance), since <= state.generation else {
                return (keys, now)
            }
            return (keys.filter { state.changed($0, after: since) }, now)
        }
    }

    /// Waits until one of `keys` changes after `token`, or `timeout` passes, or the caller is cancelled.
    ///
    /// - Returns: The keys that changed (empty after the timeout) and the token to send next.
    func wait(_ keys: Set<String>, since token: String?, timeout: Duration) async -> (
        changed: Set<String>, token: String
    ) {
        let now = changes(keys, since: token)
        guard token != nil, now.changed.isEmpty, timeout > .zero else { return now }
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let registered = self.state.withLock { state in
                            // A change between the check above and here is seen now, not missed.
                            guard let since = Self.generation(token!, instance: self.instance),
                                !keys.contains(where: { state.changed($0, after: since) }), !Task.isCancelled
                            else { return false }
                            state.waiters[id] = Waiter(keys: keys, continuation: continuation)
                            return true
                        }
                        if !registered { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        return changes(keys, since: token)
    }

    private static func generation(_ token: String, instance: String) -> UInt64? {
        let parts = token.split(separator: ".", maxSplits: 1)
        guard parts.count == 2, parts[0] == instance else { return nil }
        return UInt64(parts[1])
    }
}
