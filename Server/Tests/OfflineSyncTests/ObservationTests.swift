import Foundation
import OfflineSync
import Testing

/// Watched queries (issue 16, point 1): `SyncTable.observe` and `observeCount` against a real store and a real
/// server — what they yield after local writes, a pull, a purge, a write of another table, and that cancelling
/// the consumer ends them.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct ObservationTests {
    /// Collects what a sequence yields, in a task of its own, for the test to wait on.
    actor Collected<Value: Sendable> {
        private(set) var values: [Value] = []
        private(set) var finished = false
        private var task: Task<Void, Never>?

        init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Value {
            Task { await self.start(sequence) }
        }

        private func start<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Value {
            task = Task {
                do {
                    for try await value in sequence { self.append(value) }
                } catch {}
                self.finish()
            }
        }

        private func append(_ value: Value) { values.append(value) }
        private func finish() { finished = true }
        func cancel() { task?.cancel() }

        /// Waits (up to `limit`) until the last value satisfies `condition`; returns it. The limit guards against a
        /// hang: alone a value comes in a fraction of a second, in the whole suite on two cores in up to 20 s (tests
        /// that block a cooperative thread hold up every other test's tasks).
        @discardableResult
        func last(within limit: Duration = .seconds(60), where condition: @Sendable (Value) -> Bool) async throws
            -> Value
        {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if let last = values.last, condition(last) { return last }
                try await Task.sleep(for: .milliseconds(10))
            }
            throw ObservationTimeout(description: "no such value; saw \(values.count): \(String(describing: values))")
        }

        /// Waits (up to 20 s) for the sequence to end.
        func waitUntilFinished() async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while !finished, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            if !finished { throw ObservationTimeout(description: "the sequence did not end") }
        }
    }

    struct ObservationTimeout: Error, CustomStringConvertible { let description: String }

    struct Note: Codable, Sendable, Equatable {
        var id: String
        var body: String
    }

    static func texts(_ items: [TodoItem]) -> [String] { items.map(\.text) }

    @Test func aWatchedQueryFollowsLocalWritesPullsAndPurgesAndNotOtherTables() async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace) { url in
            let client = try await SyncClient.make(url, workspace: workspace)
            let todos = try client.syncTable("TodoItem", of: TodoItem.self)
            let notes = try client.syncTable("Notes", of: Note.self)
            let open = Collected(todos.observe(TableQuery().filter { $0.complete == false }.orderBy(\.text)))
            let count = Collected(todos.observeCount())

            try await open.last { $0.isEmpty }
            try await count.last { $0 == 0 }
            try await todos.insert(TodoItem(id: "a", text: "milk", complete: false))
            try await open.last { Self.texts($0) == ["milk"] }
            try await todos.update(TodoItem(id: "a", text: "oat milk", complete: false))
            try await open.last { Self.texts($0) == ["oat milk"] }

            // Another table's write and a change the query does not match yield nothing.
            let before = await open.values.count
            try await notes.insert(Note(id: "n", body: "unrelated"))
            try await todos.insert(TodoItem(id: "done", text: "done already", complete: true))
            try await count.last { $0 == 2 }
            #expect(await open.values.count == before)

            // Another device's item arrives with a pull.
            let other = try await SyncClient.make(url, workspace: workspace, store: "other.sqlite")
            try await other.syncTable("TodoItem", of: TodoItem.self).insert(
                TodoItem(id: "b", text: "bread", complete: false))
            _ = try await other.push()
            try await todos.pull()
            try await open.last { Self.texts($0) == ["bread", "oat milk"] }
            try await count.last { $0 == 3 }

            try await todos.purge(mode: .evenIfPending)
            try await open.last { $0.isEmpty }
            try await count.last { $0 == 0 }

            await open.cancel()
            try await open.waitUntilFinished()
            #expect(await count.finished == false)
            await count.cancel()
            try await count.waitUntilFinished()
        }
    }
}
