import Foundation
import SyncSQLite

/// Who is waiting for which tables to change, for the `GET /changes` long poll (docs/changes.md). Each committed
/// write publishes its key — the table, or the table and owner of a per-user table's row — and wakes the
/// requests that follow that key. A token is this instance's id and its change counter: a request with a token
/// of another instance (or of this one before a restart) is answered at once with every table it follows, so
/// that nothing is missed behind a load balancer; the client then pulls, which is cheap when nothing changed.
final class ChangeHub: Sendable {
    private struct Waiter {
        let keys: Set<String>
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var generation: UInt64 = 0
        var lastChange: [String: UInt64] = [:]
        var waiters: [UUID: Waiter] = [:]
    }

    /// This instance, in tokens.
    let instance = UUID().uuidString.lowercased().prefix(8)
    private let state = Locked(State())

    /// Notes a committed change of `key` and wakes whoever follows it.
    func publish(_ key: String) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation += 1
            state.lastChange[key] = state.generation
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
            return (keys.filter { (state.lastChange[$0] ?? 0) > since }, now)
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
                                !keys.contains(where: { (state.lastChange[$0] ?? 0) > since }), !Task.isCancelled
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

    private static func generation(_ token: String, instance: Substring) -> UInt64? {
        let parts = token.split(separator: ".", maxSplits: 1)
        guard parts.count == 2, parts[0] == instance else { return nil }
        return UInt64(parts[1])
    }
}
