import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncServer
import Testing

/// Pulls that show change sets whole (issue 49): a set committed while a device pulls its two tables — after the
/// first table's request, before the second's — is half on the device after separate pulls, whole after a pull of
/// both together; a pull together that fails part-way applies nothing (separate pages applied half a set); a pull
/// whose tables never stop changing applies nothing after its passes and says so, and the next completes it.
@Suite(.timeLimit(.minutes(3))) struct ChangeSetPullTests {
    static func row(_ id: String) -> TodoItem { TodoItem(id: id, text: id, complete: false) }

    /// The two tables a set spans.
    static func tables() throws -> [TableConfiguration] {
        [try TableConfiguration(name: "Orders"), try TableConfiguration(name: "Lines")]
    }

    /// Runs `action` before each request whose path ends in `path` and that `when` picks (by its number among them,
    /// from 1), then forwards it; fails those `failing` picks with a timeout instead of forwarding them.
    final class Interleaving: HTTPTransport, @unchecked Sendable {  // @unchecked: `seen` behind `lock`.
        let base = URLSessionTransport()
        let path: String
        let when: @Sendable (Int) -> Bool
        let failing: @Sendable (Int) -> Bool
        let action: @Sendable () async throws -> Void
        private let lock = NSLock()
        private var seen = 0
        var armed = false

        init(
            path: String, when: @escaping @Sendable (Int) -> Bool,
            failing: @escaping @Sendable (Int) -> Bool = { _ in false },
            action: @escaping @Sendable () async throws -> Void
        ) {
            (self.path, self.when, self.failing, self.action) = (path, when, failing, action)
        }

        func arm() { lock.withLock { armed = true } }
        func disarm() { lock.withLock { armed = false } }

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            let number: Int? = lock.withLock {
                guard armed, request.method == "GET", request.url.path.lowercased().hasSuffix(path) else { return nil }
                seen += 1
                return seen
            }
            if let number {
                if failing(number) { throw TransportError(.timedOut, host: "127.0.0.1") }
                if when(number) { try await action() }
            }
            return try await base.send(request)
        }
    }

    /// The ids a client holds in its local store, in both tables.
    static func held(_ client: SyncClient) async throws -> (orders: Set<String>, lines: Set<String>) {
        (
            Set(try await client.syncTable("Orders", of: TodoItem.self).items().map(\.id)),
            Set(try await client.syncTable("Lines", of: TodoItem.self).items().map(\.id))
        )
    }

    /// A writer with a first row in each table, pushed; and its `Orders`/`Lines` set, pushed by `commitSet`.
    static func writer(_ url: URL, _ workspace: Workspace) async throws -> SyncClient {
        let writer = try await SyncClient.make(url, workspace: workspace, store: "writer.sqlite")
        let (orders, lines) = (
            try writer.syncTable("Orders", of: TodoItem.self), try writer.syncTable("Lines", of: TodoItem.self)
        )
        try await orders.insert(row("o0"))
        try await lines.insert(row("l0"))
        try await writer.push()
        return writer
    }

    static func commitSet(_ writer: SyncClient, _ number: Int) async throws {
        let (orders, lines) = (
            try writer.syncTable("Orders", of: TodoItem.self), try writer.syncTable("Lines", of: TodoItem.self)
        )
        try await writer.changeSet { set in
            try set.insert(row("o\(number)"), into: orders)
            try set.insert(row("l\(number)"), into: lines)
        }
        let pushed = try await writer.push()
        #expect(pushed.changeSetsPushed == 1)
    }

    @Test(arguments: [false, true])
    func aSetCommittedBetweenTheTablesRequestsIsWholeOnlyWhenPulledTogether(together: Bool) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: try Self.tables()) { url in
            let writer = try await Self.writer(url, workspace)
            // The set commits just before the reader's first request for lines in the pull below.
            let transport = Interleaving(path: "/tables/lines", when: { $0 == 1 }) {
                try await Self.commitSet(writer, 1)
            }
            let reader = try await SyncClient.make(url, workspace: workspace, store: "reader.sqlite") {
                $0.transport = transport
            }
            let (orders, lines) = (
                try reader.syncTable("Orders", of: TodoItem.self), try reader.syncTable("Lines", of: TodoItem.self)
            )
            try await reader.pullTogether([try orders.pulling(queryID: "all"), try lines.pulling(queryID: "all")])
            #expect(try await Self.held(reader) == (["o0"], ["l0"]))
            transport.arm()
            if together {
                let summary = try await reader.pullTogether([
                    try orders.pulling(queryID: "all"), try lines.pulling(queryID: "all"),
                ])
                // Pass 1 found l1, pass 2 o1, pass 3 nothing: then both applied at once.
                #expect(summary.isWhole && summary.passes == 3)
                #expect(summary.tables.map(\.summary.appliedCount) == [1, 1])
                #expect(summary.tables.map(\.summary.requestCount) == [3, 3])
                #expect(try await Self.held(reader) == (["o0", "o1"], ["l0", "l1"]))
            } else {
                try await orders.pull(queryID: "all")
                try await lines.pull(queryID: "all")
                // The line without its order: the half set separate pulls show until the next pull.
                #expect(try await Self.held(reader) == (["o0"], ["l0", "l1"]))
            }
        }
    }

    @Test func aPullTogetherThatFailsPartWayAppliesNothingAndTheNextCompletesIt() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: try Self.tables()) { url in
            let writer = try await Self.writer(url, workspace)
            try await Self.commitSet(writer, 1)
            // The second request for orders (pass 2) is dropped: the server is "unavailable".
            let transport = Interleaving(path: "/tables/orders", when: { _ in false }, failing: { $0 == 2 }) {}
            let reader = try await SyncClient.make(url, workspace: workspace, store: "reader.sqlite") {
                $0.transport = transport
                $0.retryLimit = 0
            }
            let (orders, lines) = (
                try reader.syncTable("Orders", of: TodoItem.self), try reader.syncTable("Lines", of: TodoItem.self)
            )
            transport.arm()
            let pulls = [try orders.pulling(queryID: "all"), try lines.pulling(queryID: "all")]
            await #expect(throws: PullError.self) { try await reader.pullTogether(pulls) }
            #expect(try await Self.held(reader) == ([], []))
            let summary = try await reader.pullTogether(pulls)
            #expect(summary.isWhole)
            #expect(try await Self.held(reader) == (["o0", "o1"], ["l0", "l1"]))
        }
    }

    @Test(arguments: [false, true])
    func aPullCutBetweenPagesOfOneTableLeavesNoHalfSetOnlyWhenTogether(together: Bool) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: try Self.tables()) { url in
            let writer = try await SyncClient.make(url, workspace: workspace, store: "writer.sqlite")
            let orders = try writer.syncTable("Orders", of: TodoItem.self)
            try await writer.changeSet { set in
                for id in ["s1", "s2", "s3"] { try set.insert(Self.row(id), into: orders) }
            }
            #expect(try await writer.push().changeSetsPushed == 1)
            // Pages of one row; the request for the second page is dropped.
            let transport = Interleaving(path: "/tables/orders", when: { _ in false }, failing: { $0 == 2 }) {}
            let reader = try await SyncClient.make(url, workspace: workspace, store: "reader.sqlite") {
                $0.transport = transport
                $0.retryLimit = 0
                $0.pullPageSize = 1
                $0.maxPullPageSize = 1
            }
            let table = try reader.syncTable("Orders", of: TodoItem.self)
            transport.arm()
            if together {
                await #expect(throws: PullError.self) { try await reader.pullTogether([try table.pulling()]) }
                #expect(try await Self.held(reader).orders.isEmpty)
                #expect(try await reader.pullTogether([try table.pulling()]).isWhole)
                #expect(try await Self.held(reader).orders == ["s1", "s2", "s3"])
            } else {
                await #expect(throws: PullError.self) { try await table.pull() }
                // One member of the set, applied with its page.
                #expect(try await Self.held(reader).orders == ["s1"])
            }
        }
    }

    /// Applied after its passes, what the pull held showed set 2's line without its order: failed before the pull
    /// applied nothing then.
    @Test func tablesThatNeverStopChangingAreNotAppliedAfterThePassesAndTheNextPullCompletesThem() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: try Self.tables()) { url in
            let writer = try await Self.writer(url, workspace)
            let counter = Counter()
            // A new set before every request for lines: every pass finds something new.
            let transport = Interleaving(path: "/tables/lines", when: { _ in true }) {
                try await Self.commitSet(writer, counter.next())
            }
            let reader = try await SyncClient.make(url, workspace: workspace, store: "reader.sqlite") {
                $0.transport = transport
            }
            let (orders, lines) = (
                try reader.syncTable("Orders", of: TodoItem.self), try reader.syncTable("Lines", of: TodoItem.self)
            )
            transport.arm()
            let summary = try await reader.pullTogether(
                [try orders.pulling(queryID: "all"), try lines.pulling(queryID: "all")], passes: 2)
            #expect(!summary.isWhole && summary.passes == 2)
            // Sets 1 and 2 committed before lines' requests: it held their lines and set 1's order only, so it applied
            // nothing, and the cursors stayed.
            #expect(summary.total.appliedCount == 0)
            #expect(try await Self.held(reader) == ([], []))
            // Once writes pause, the next pull brings everything, whole.
            transport.disarm()
            let next = try await reader.pullTogether([
                try orders.pulling(queryID: "all"), try lines.pulling(queryID: "all"),
            ])
            #expect(next.isWhole)
            #expect(try await Self.held(reader) == (["o0", "o1", "o2"], ["l0", "l1", "l2"]))
        }
    }

    @Test func aTableNamedTwiceIsRefused() async throws {
        let workspace = try Workspace()
        let client = try await SyncClient.make(LiveServer.down, workspace: workspace)
        let orders = try client.syncTable("Orders", of: TodoItem.self)
        await #expect(throws: ValueError.self) {
            try await client.pullTogether([try orders.pulling(), try orders.pulling(queryID: "other")])
        }
    }

    /// Numbers from 1 on, one per call.
    final class Counter: @unchecked Sendable {  // @unchecked: `value` behind `lock`.
        private let lock = NSLock()
        private var value = 0
        func next() -> Int {
            lock.withLock {
                value += 1
                return value
            }
        }
    }
}
