import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SyncCore
import SyncSQLite
import Testing

@testable import SyncServer

/// Fair shares (issue 67), a test per rule: a caller over its share waits, then is refused 429 with `Retry-After`; a
/// freed place goes to the waiting callers in turn, so a caller with many requests gets no more than one with few; a
/// server over its bound sheds with 503; a cancelled waiter holds no place; the rate refuses with the wait; the health,
/// metrics and held change-feed requests take no share; a started write is never dropped; the server applies them.
@Suite(.timeLimit(.minutes(1))) struct FairShareTests {
    static func shares(perCaller: Int = 1, queue: Int = 8, running: Int = 1, queued: Int = 16) -> FairShares {
        var shares = FairShares()
        (shares.perCaller, shares.perCallerQueue, shares.maxRunning, shares.maxQueued) = (
            perCaller, queue, running, queued
        )
        return shares
    }

    /// Waits until `queue` has `count` requests waiting.
    static func waiting(_ count: Int, in queue: AdmissionQueue) async throws {
        while queue.counts.queued < count { try await Task.sleep(for: .milliseconds(1)) }
    }

    @Test func aCallerOverItsShareWaitsThenIsRefused() async throws {
        let queue = AdmissionQueue(Self.shares(perCaller: 1, queue: 1, running: 4)) { 0 }
        _ = try await queue.admit("b")  // another caller lately: "a" is not alone
        queue.release("b")
        #expect(try await queue.admit("a") == .atOnce)
        let second = Task { try await queue.admit("a") }
        try await Self.waiting(1, in: queue)
        await #expect(throws: AdmissionQueue.Refusal.callerQueueFull) { try await queue.admit("a") }
        #expect(try await queue.admit("b") == .atOnce)  // another caller is not held back
        queue.release("a")
        #expect(try await second.value == .afterWaiting)
        queue.release("a")
        queue.release("b")
        #expect(queue.counts == (0, 0))
    }

    /// A caller alone takes every place; another's request brings it back to its share, and after the sharing window
    /// with nobody else, it is alone again.
    @Test func aCallerAloneTakesEveryPlaceUntilAnotherComes() async throws {
        let now = Locked(0.0)
        let queue = AdmissionQueue(Self.shares(perCaller: 1, queue: 8, running: 4)) { now.withLock { $0 } }
        for _ in 0..<3 { #expect(try await queue.admit("a") == .atOnce) }
        #expect(try await queue.admit("b") == .atOnce)
        queue.release("a")
        let waiting = Task { try await queue.admit("a") }  // "b" runs: "a" is held to its share
        try await Self.waiting(1, in: queue)
        queue.release("b")
        queue.release("a")
        queue.release("a")  // "a" runs nothing now, and "b" came lately: its waiter gets its one place
        #expect(try await waiting.value == .afterWaiting)
        now.withLock { $0 = AdmissionQueue.sharingWindow }
        #expect(try await queue.admit("a") == .atOnce)  // alone again
        queue.release("a")
        queue.release("a")
        #expect(queue.counts == (0, 0))
    }

    @Test func freedPlacesGoToTheWaitingCallersInTurn() async throws {
        let queue = AdmissionQueue(Self.shares(perCaller: 1, queue: 8, running: 1))
        let order = Locked<[String]>([])
        #expect(try await queue.admit("many") == .atOnce)
        var tasks: [Task<Void, any Error>] = []
        for (index, caller) in ["many", "many", "many", "few"].enumerated() {
            tasks.append(
                Task {
                    _ = try await queue.admit(caller)
                    order.withLock { $0.append(caller) }
                    queue.release(caller)
                })
            try await Self.waiting(index + 1, in: queue)
        }
        queue.release("many")
        for task in tasks { try await task.value }
        // "few" waited behind one of "many"'s requests, not behind all three.
        #expect(order.withLock { $0 } == ["many", "few", "many", "many"])
    }

    @Test func aServerOverItsBoundSheds() async throws {
        let queue = AdmissionQueue(Self.shares(perCaller: 1, queue: 8, running: 1, queued: 2))
        #expect(try await queue.admit("a") == .atOnce)
        let waiters = [Task { try await queue.admit("b") }, Task { try await queue.admit("c") }]
        try await Self.waiting(2, in: queue)
        await #expect(throws: AdmissionQueue.Refusal.serverQueueFull) { try await queue.admit("d") }
        queue.release("a")
        for waiter in waiters {
            _ = try await waiter.value
            queue.release(waiter == waiters[0] ? "b" : "c")
        }
    }

    @Test func aCancelledWaiterHoldsNoPlace() async throws {
        let queue = AdmissionQueue(Self.shares())
        #expect(try await queue.admit("a") == .atOnce)
        let waiter = Task { try await queue.admit("b") }
        try await Self.waiting(1, in: queue)
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(queue.counts == (1, 0))
        queue.release("a")
        #expect(queue.counts == (0, 0))
        #expect(try await queue.admit("b") == .atOnce)
    }

    @Test func theRateRefusesWithTheWait() async throws {
        var shares = Self.shares(perCaller: 8, running: 8)
        shares.perCallerRate = 2
        let now = Locked(0.0)
        let queue = AdmissionQueue(shares) { now.withLock { $0 } }
        for _ in 0..<2 {
            _ = try await queue.admit("a")
            queue.release("a")
        }
        await #expect(throws: AdmissionQueue.Refusal.rateExceeded(retryAfter: 1)) { try await queue.admit("a") }
        _ = try await queue.admit("b")  // each caller has its own
        now.withLock { $0 = 0.5 }
        #expect(try await queue.admit("a") == .atOnce)
    }

    /// The middleware: 429 and 503 with `Retry-After`, before the request runs; health and a held change feed pass;
    /// the write that was running when the refusals came completes.
    @Test func theMiddlewareAnswersRefusalsAndLetsTheFreePathsPass() async throws {
        let queue = AdmissionQueue(Self.shares(perCaller: 1, queue: 1, running: 1, queued: 1))
        let gate = AsyncStream<Void>.makeStream()
        let router = Router(context: SyncRequestContext.self)
        router.add(middleware: CallerFromHeader())
        router.add(middleware: UnexpectedErrorMiddleware())
        router.add(middleware: FairShareMiddleware(queue: queue))
        router.post("write") { _, _ in
            for await _ in gate.stream { break }
            return Response(status: .created)
        }
        router.get("read") { _, _ in Response(status: .ok) }
        router.get("health") { _, _ in Response(status: .ok) }
        router.get("changes") { _, _ in Response(status: .ok) }
        try await Application(router: router).test(.router) { client in
            func send(_ method: HTTPRequest.Method, _ path: String, as caller: String) async throws -> TestResponse {
                try await client.execute(uri: path, method: method, headers: [CallerFromHeader.name: caller])
            }
            let write = Task { try await send(.post, "/write", as: "alice") }
            while queue.counts.running < 1 { try await Task.sleep(for: .milliseconds(1)) }
            let read = Task { try await send(.get, "/read", as: "alice") }
            try await Self.waiting(1, in: queue)
            let throttled = try await send(.get, "/read", as: "alice")
            #expect(throttled.status == .tooManyRequests)
            #expect(throttled.headers[.retryAfter] == "1")
            let shed = try await send(.get, "/read", as: "bob")
            #expect(shed.status == .serviceUnavailable)
            #expect(shed.headers[.retryAfter] == "1")
            #expect(try await send(.get, "/health", as: "carol").status == .ok)
            #expect(try await send(.get, "/changes", as: "alice").status == .ok)
            gate.continuation.yield()
            #expect(try await write.value.status == .created)
            #expect(try await read.value.status == .ok)
            #expect(queue.counts == (0, 0))
        }
    }

    /// Sets the caller from a header, as the token middleware would from a token.
    struct CallerFromHeader: RouterMiddleware {
        typealias Context = SyncRequestContext
        static let name = HTTPField.Name("X-Test-Caller")!

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
            async throws -> Response
        {
            var context = context
            if let subject = request.headers[Self.name] { context.caller = Caller(subject: subject, roles: []) }
            return try await next(request, context)
        }
    }

    /// The server applies its configuration's shares: a rate of one request a minute lets one table request through
    /// and refuses the next 429, while `/health` always answers.
    @Test func theServerAppliesItsShares() async throws {
        try await TestDatabase.with(.sqlite) { database in
            var configuration = Fixture.configuration(database, tables: [Fixture.table("Note")])
            configuration.fairShares.perCallerRate = 1.0 / 60
            try await Self.checkRate(configuration)
        }
    }

    static func checkRate(_ configuration: SyncServerConfiguration) async throws {
        try await buildApplication(configuration).test(.router) { client in
            #expect(try await client.send(.get, "/tables/Note").status == .ok)
            let refused = try await client.send(.get, "/tables/Note")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "60")
            #expect(refused.error?.contains("faster than this server allows") == true)
            #expect(try await client.send(.get, "/health", versioned: false).status == .ok)
        }
    }
}
