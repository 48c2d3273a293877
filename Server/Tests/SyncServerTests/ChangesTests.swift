import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import Testing

@testable import SyncServer

/// `GET /changes` (issue 16, point 4; docs/changes.md): a follower learns of a committed write at once, waits out
/// its `wait` otherwise, is answered at once for a token it did not get here, and is not woken by another user's
/// row in a per-user table.
@Suite(.timeLimit(.minutes(3))) struct ChangesTests {
    @Test func aWriteWakesTheFollowersOfItsTableOnly() async throws {
        try await Fixture.withServer(.sqlite, tables: [Fixture.table("TodoItem"), Fixture.table("Notes")]) { client in
            let first = try await client.send(.get, "/changes?tables=TodoItem,Notes", versioned: false)
            #expect(first.status == .ok)
            #expect(first.json?["changed"] == [])
            let token = try #require(first.json?["token"]?.stringValue)

            // Nothing changes: the request waits out its `wait` and keeps the token.
            let started = ContinuousClock.now
            let idle = try await client.send(.get, "/changes?tables=TodoItem&since=\(token)&wait=1", versioned: false)
            #expect(idle.json?["changed"] == [] && idle.json?["token"]?.stringValue == token)
            #expect(ContinuousClock.now - started >= .milliseconds(900))

            // A write to Notes wakes a follower of TodoItem and Notes, naming Notes alone.
            async let woken = client.send(
                .get, "/changes?tables=TodoItem,Notes&since=\(token)&wait=30", versioned: false)
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await client.send(.post, "/tables/Notes", json: ["id": "n"]).status == .created)
            let reply = try await woken
            #expect(reply.json?["changed"] == ["Notes"])
            #expect(reply.json?["token"]?.stringValue != token)

            // A token from elsewhere (another instance, a restart) is answered at once with every table.
            let foreign = try await client.send(
                .get, "/changes?tables=TodoItem&since=abcdef12.7&wait=30", versioned: false)
            #expect(foreign.json?["changed"] == ["TodoItem"])

            #expect(try await client.send(.get, "/changes?tables=Nope", versioned: false).status == .notFound)
            #expect(try await client.send(.get, "/changes", versioned: false).status == .badRequest)
            #expect(
                try await client.send(.get, "/changes?tables=TodoItem&wait=99", versioned: false).status == .badRequest)
        }
    }

    @Test func anotherUsersRowDoesNotWakeAPerUserFollower() async throws {
        let alice = AuthTests.bearer(try await AuthTests.token("alice"))
        let bob = AuthTests.bearer(try await AuthTests.token("bob"))
        try await AuthTests.withServer(.sqlite) { client in
            #expect(try await client.send(.get, "/changes?tables=TodoItem", versioned: false).status == .unauthorized)
            let token = try #require(
                try await client.send(.get, "/changes?tables=TodoItem", headers: alice, versioned: false)
                    .json?["token"]?.stringValue)
            async let aliceWakes = client.send(
                .get, "/changes?tables=TodoItem&since=\(token)&wait=2", headers: alice, versioned: false)
            try await Task.sleep(for: .milliseconds(100))
            #expect(
                try await client.send(.post, "/tables/TodoItem", json: ["id": "b1"], headers: bob).status == .created)
            #expect(try await aliceWakes.json?["changed"] == [], "bob's row woke alice")
            async let again = client.send(
                .get, "/changes?tables=TodoItem&since=\(token)&wait=30", headers: alice, versioned: false)
            try await Task.sleep(for: .milliseconds(100))
            #expect(
                try await client.send(.post, "/tables/TodoItem", json: ["id": "a1"], headers: alice).status == .created)
            #expect(try await again.json?["changed"] == ["TodoItem"])
        }
    }
}
