import Foundation
import OfflineSyncTesting
import Testing

@testable import OfflineSync

/// The automatic sync's timing on a manual clock against a scripted backend: the backoff's waits and nothing
/// between them, nothing sent offline whatever the clock does, the network's return and a new network path ending
/// a wait at once (without the clock moving), a 401 stopping every try until resumed. The schedule's rules alone
/// are ``AutoSyncScheduleTests``; two devices converging through a real server are the server package's
/// `AutoSyncTests`.
@Suite(.timeLimit(.minutes(3))) struct AutoSyncClockTests {
    /// A backend in one transport: inserts are answered 201 with a version, pulls with an empty page, the change
    /// feed with 404 (the schedule pulls); while `down` every request fails unreachable, while `refusing` every
    /// table request is 401. Each request is kept with the clock's time.
    final class Backend: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind `lock`.
        struct Request: Equatable, CustomStringConvertible {
            let at: Duration
            let method: String
            let path: String
            var description: String { "\(method) \(path) at \(at)" }
        }

        private let lock = NSLock()
        private let clock: ManualClock
        private var sent: [Request] = []
        private var isDown = false
        private var isRefusing = false
        private var waiters: [(count: Int, continuation: CheckedContinuation<[Request], Never>)] = []

        init(clock: ManualClock) { self.clock = clock }

        var down: Bool {
            get { lock.withLock { isDown } }
            set { lock.withLock { isDown = newValue } }
        }
        var refusing: Bool {
            get { lock.withLock { isRefusing } }
            set { lock.withLock { isRefusing = newValue } }
        }
        /// The requests to tables (the change feed's are left out: it is followed beside the loop).
        var tableRequests: [Request] { lock.withLock { sent.filter { $0.path.contains("/tables/") } } }

        /// Waits until `count` table requests were sent, and returns them.
        func tableRequests(atLeast count: Int) async -> [Request] {
            await withCheckedContinuation { continuation in
                let requests: [Request]? = lock.withLock {
                    let requests = sent.filter { $0.path.contains("/tables/") }
                    if requests.count >= count { return requests }
                    waiters.append((count, continuation))
                    return nil
                }
                if let requests { continuation.resume(returning: requests) }
            }
        }

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            let (down, refusing, due) = lock.withLock {
                sent.append(Request(at: clock.now.offset, method: request.method, path: request.url.path))
                let requests = sent.filter { $0.path.contains("/tables/") }
                let due = waiters.filter { $0.count <= requests.count }.map { ($0.continuation, requests) }
                waiters.removeAll { $0.count <= requests.count }
                return (isDown, isRefusing, due)
            }
            for (waiter, requests) in due { waiter.resume(returning: requests) }
            if down { throw TransportError(.unreachable, host: "backend") }
            guard request.url.path.contains("/tables/") else { return HTTPResponseData(status: 404) }
            if refusing { return HTTPResponseData(status: 401) }
            let json = ["Content-Type": "application/json"]
            guard request.method == "POST", var item = try JSONValue(parsing: request.body ?? Data()).objectValue
            else {
                return HTTPResponseData(status: 200, headers: json, body: Data("[]".utf8))
            }
            item["version"] = "v1"
            item["updatedAt"] = "2026-11-27T00:00:00.000Z"
            return HTTPResponseData(status: 201, headers: json, body: JSONValue.object(item).serializedData())
        }
    }

    static func device(
        _ workspace: Workspace, clock: ManualClock, backend: Backend
    ) async throws -> (SyncClient, SyncTable<TodoItem>) {
        let client = try await SyncClient.make(URL(string: "http://backend.invalid")!, workspace: workspace) {
            $0.clock = clock
            $0.transport = backend
            $0.retryLimit = 0
            $0.protocol = .v2
            $0.batchPush = .never
        }
        return (client, try client.syncTable("TodoItem", of: TodoItem.self))
    }

    static var options: AutoSyncOptions {
        var options = AutoSyncOptions()
        options.reachability = nil
        options.pushDelay = .milliseconds(50)
        options.pullInterval = .seconds(60)
        options.initialBackoff = .milliseconds(100)
        options.maximumBackoff = .milliseconds(400)
        return options
    }

    /// Waits for the status to meet `condition` (the clock is not moved).
    static func status(_ client: SyncClient, where condition: (SyncStatus) -> Bool) async -> SyncStatus? {
        for await status in client.status() where condition(status) { return status }
        return nil
    }

    static func todo(_ id: String) -> TodoItem { TodoItem(id: id, text: id, complete: false) }

    @Test(.timeLimit(.minutes(1)))
    func anOutageIsTriedAgainAfterEachBackoffWaitAndNotBetween() async throws {
        let workspace = try Workspace()
        let clock = ManualClock()
        let backend = Backend(clock: clock)
        backend.down = true
        let (client, todos) = try await Self.device(workspace, clock: clock, backend: backend)
        try await todos.insert(Self.todo("a"))
        await client.startSyncing(pulling: [], options: Self.options)
        // The first try comes at once (the schedule's first tick) or after the 50 ms a write waits for more; then
        // each failed try waits 100, 200, 400, 400 ms. The loop is quiet when two sleeps are registered: the
        // schedule's next tick, a minute away, and the loop's own wait.
        for _ in 0..<5 {
            let deadlines = await clock.sleeps(atLeast: 2)
            #expect(deadlines[1].offset == .seconds(60))
            clock.advance(to: deadlines[0])
        }
        _ = await clock.sleeps(atLeast: 2)
        let tries = backend.tableRequests
        #expect(tries.allSatisfy { $0.method == "POST" })
        let waits = zip(tries, tries.dropFirst()).map { $1.at - $0.at }
        #expect(waits == [100, 200, 400, 400, 400].map(Duration.milliseconds), "\(tries)")
        #expect([.zero, .milliseconds(50)].contains(tries.first?.at), "\(tries)")
        let unavailable = await Self.status(client) { $0.lastError != nil }
        guard case .unavailable? = unavailable?.lastError else {
            Issue.record("expected unavailable, got \(String(describing: unavailable))")
            return
        }

        backend.down = false
        let next = await clock.nextSleep()
        clock.advance(to: next)
        #expect(await Self.status(client) { $0.lastError == nil && $0.pendingCount == 0 } != nil)
        #expect(backend.tableRequests.count == tries.count + 1)
        #expect(backend.tableRequests.last?.at == next.offset)
        await client.stopSyncing()
    }

    @Test(.timeLimit(.minutes(1)))
    func nothingIsSentOfflineWhateverTheClockAndTheNetworksReturnEndsAWaitAtOnce() async throws {
        let workspace = try Workspace()
        let clock = ManualClock()
        let backend = Backend(clock: clock)
        let network = ManualReachability(reachable: false)
        var options = Self.options
        options.pushDelay = .zero
        (options.initialBackoff, options.maximumBackoff) = (.seconds(60), .seconds(60))
        options.reachability = network
        let (client, todos) = try await Self.device(workspace, clock: clock, backend: backend)
        await client.startSyncing(pulling: [todos.autoPull()], options: options)

        // Offline: a write, three scheduled pulls and the change feed's waits send nothing. Quiet is two sleeps:
        // the schedule's next tick and the change feed's wait for the network.
        try await todos.insert(Self.todo("a"))
        for _ in 0..<3 {
            _ = await clock.sleeps(atLeast: 2)
            clock.advance(by: .seconds(60))
        }
        _ = await clock.sleeps(atLeast: 2)
        #expect(backend.tableRequests.isEmpty, "\(backend.tableRequests)")
        // Back: the sync (its push, then its pull) runs without the clock moving.
        let back = clock.now
        network.set(true)
        let synced = await backend.tableRequests(atLeast: 2)
        #expect(synced.map(\.method) == ["POST", "GET"])
        #expect(synced.allSatisfy { $0.at == back.offset })

        // The server cannot be reached: the backoff would wait a minute, but the network going and coming back
        // (the device learns of both at once) ends the wait.
        backend.down = true
        try await todos.insert(Self.todo("b"))
        _ = await Self.status(client) {
            if case .unavailable? = $0.lastError { true } else { false }
        }
        backend.down = false
        let down = clock.now
        network.set(false)
        network.set(true)
        _ = await Self.status(client) { $0.lastError == nil && $0.pendingCount == 0 }
        #expect(clock.now == down, "synced without waiting for the backoff")
        await client.stopSyncing()
    }

    /// A network path that changes but stays usable (Wi-Fi to cellular: NWPathMonitor says "satisfied" again).
    struct PathChanges: NetworkReachability {
        let stream: AsyncStream<Bool>
        let continuation: AsyncStream<Bool>.Continuation
        init() { (stream, continuation) = AsyncStream.makeStream(of: Bool.self) }
        var isReachable: Bool { true }
        func updates() -> AsyncStream<Bool> { stream }
    }

    @Test(.timeLimit(.minutes(1)))
    func aNewNetworkPathEndsTheBackoffAtOnce() async throws {
        let workspace = try Workspace()
        let clock = ManualClock()
        let backend = Backend(clock: clock)
        let path = PathChanges()
        path.continuation.yield(true)
        var options = Self.options
        options.pushDelay = .zero
        (options.initialBackoff, options.maximumBackoff) = (.seconds(60), .seconds(60))
        options.reachability = path
        let (client, todos) = try await Self.device(workspace, clock: clock, backend: backend)
        backend.down = true
        await client.startSyncing(pulling: [todos.autoPull()], options: options)
        try await todos.insert(Self.todo("a"))
        _ = await Self.status(client) {
            if case .unavailable? = $0.lastError { true } else { false }
        }
        backend.down = false
        let down = clock.now
        path.continuation.yield(true)
        _ = await Self.status(client) { $0.lastError == nil && $0.pendingCount == 0 }
        #expect(clock.now == down, "synced without waiting for the backoff")
        await client.stopSyncing()
    }

    @Test(.timeLimit(.minutes(1)))
    func a401StopsEveryTryUntilResumed() async throws {
        let workspace = try Workspace()
        let clock = ManualClock()
        let backend = Backend(clock: clock)
        backend.refusing = true
        let (client, todos) = try await Self.device(workspace, clock: clock, backend: backend)
        await client.startSyncing(pulling: [todos.autoPull()], options: Self.options)
        _ = await Self.status(client) { $0.lastError == .unauthorized && !$0.isSyncing }  // the first pull's
        let stopped = backend.tableRequests.count
        // A write, three scheduled pulls and every other timer on the clock: no request while signed out.
        try await todos.insert(Self.todo("a"))
        for _ in 0..<10 where clock.now.offset < .seconds(180) { clock.advance(to: await clock.nextSleep()) }
        _ = await clock.sleeps(atLeast: 1)
        #expect(clock.now.offset >= .seconds(180))
        #expect(backend.tableRequests.count == stopped, "\(backend.tableRequests.dropFirst(stopped))")

        backend.refusing = false
        client.resumeSyncing()
        let resumed = await backend.tableRequests(atLeast: stopped + 2)
        #expect(resumed.dropFirst(stopped).map(\.method) == ["POST", "GET"])
        _ = await Self.status(client) { $0.lastError == nil && $0.pendingCount == 0 }
        await client.stopSyncing()
    }
}
