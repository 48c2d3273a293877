import Foundation
import SyncSQLite

#if canImport(Network)
    import Network
#endif

/// Whether the device can reach the network, as the automatic sync learns it
/// (``AutoSyncOptions/reachability``).
///
/// While the network is unreachable the automatic sync sends nothing (no retries that cannot succeed); the
/// moment it is reachable again, it syncs at once, whatever its backoff was waiting for. Without a
/// reachability, the backoff alone paces the retries.
public protocol NetworkReachability: Sendable {
    /// Whether the network can be used now. The automatic sync asks it before each sync and request, so an
    /// app that learns it is offline is heard at once.
    var isReachable: Bool { get }

    /// The reachability now, then after each change, until the consuming task is cancelled. Every `true` after
    /// the first one — also one that follows another `true`, for a new network path — makes the automatic sync
    /// try at once.
    ///
    /// - Returns: `true` while the network can be used.
    func updates() -> AsyncStream<Bool>
}

/// A reachability the app sets itself: from its own network monitoring, a system notification, or a test.
///
/// For example:
/// ```swift
/// let network = ManualReachability()
/// var options = AutoSyncOptions()
/// options.reachability = network
/// await client.startSyncing(pulling: [todos.autoPull()], options: options)
/// network.set(false)   // the device went offline: no request until…
/// network.set(true)    // …it is back: the sync runs at once
/// ```
public final class ManualReachability: NetworkReachability {
    private let broadcast: ReachabilityBroadcast

    /// A reachability that starts as `reachable`.
    public init(reachable: Bool = true) {
        broadcast = ReachabilityBroadcast(reachable: reachable)
    }

    public var isReachable: Bool { broadcast.isReachable }

    /// Sets the reachability; every follower learns of a change (setting the same value again tells no one).
    public func set(_ reachable: Bool) {
        broadcast.set(reachable, evenIfSame: false)
    }

    public func updates() -> AsyncStream<Bool> { broadcast.updates() }
}

#if canImport(Network)
    /// The system's view of the network (`NWPathMonitor`, started when this is made and cancelled when it is
    /// released): reachable while the path is satisfied; each new satisfied path (Wi-Fi to cellular) counts
    /// as the network being usable again. The default reachability of the automatic sync on Apple platforms.
    public final class PathMonitorReachability: NetworkReachability, @unchecked Sendable {
        // @unchecked: `monitor` is touched in init and deinit only; the rest is the broadcast's, behind its lock.
        private let monitor = NWPathMonitor()
        private let broadcast = ReachabilityBroadcast(reachable: true)

        /// Starts following the system's network path.
        public init() {
            let broadcast = broadcast
            monitor.pathUpdateHandler = { path in broadcast.set(path.status == .satisfied, evenIfSame: true) }
            monitor.start(queue: DispatchQueue(label: "OfflineSync.reachability"))
        }

        deinit { monitor.cancel() }

        public var isReachable: Bool { broadcast.isReachable }

        public func updates() -> AsyncStream<Bool> { broadcast.updates() }
    }
#endif

/// The current reachability and the streams that follow it.
final class ReachabilityBroadcast: Sendable {
    private struct State {
        var reachable: Bool
        var followers: [UUID: AsyncStream<Bool>.Continuation] = [:]
    }

    private let state: Locked<State>

    init(reachable: Bool) {
        state = Locked(State(reachable: reachable))
    }

    var isReachable: Bool { state.withLock { $0.reachable } }

    /// Sets the value and tells the followers (also of the same value again when `evenIfSame`).
    func set(_ reachable: Bool, evenIfSame: Bool) {
        let followers = state.withLock { state -> [AsyncStream<Bool>.Continuation] in
            guard evenIfSame || state.reachable != reachable else { return [] }
            state.reachable = reachable
            return Array(state.followers.values)
        }
        for follower in followers { follower.yield(reachable) }
    }

    func updates() -> AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let now = state.withLock { state in
            state.followers[id] = continuation
            return state.reachable
        }
        continuation.yield(now)
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.followers.removeValue(forKey: id) }
        }
        return stream
    }
}
