import Foundation
import OfflineSync
import SyncCore
import SyncSQL
import SyncSQLite
import SyncServer
import Testing

/// Lists shared through a members table, as devices see them (issue 32), against a real server with tokens, in both
/// dialects: a device that loses access to a list — removed while it was offline with an edit and an insert pending —
/// drops the list's rows on its next pull (and nobody else's copy), and reports its pending changes as refused; a
/// device that joins a list whose rows are older than its cursors gets all of them on its next pull; a row moved to a
/// list the user is not in leaves their device (also after two moves while it was offline), not others'.
@Suite(.onBothProtocols, .timeLimit(.minutes(3))) struct SharingTests {
    static let secret = "sharing-test-secret-0123456789abcdef"

    /// Lists (each its own group), their items, and who belongs to which list.
    static func tables() throws -> [TableConfiguration] {
        var members = try TableConfiguration(
            name: "ListMember", columns: ["listId": .string, "userId": .string, "role": .string])
        members.members = MembersTable(groupColumn: "listId", userColumn: "userId", roleColumn: "role")
        var lists = try TableConfiguration(name: "TodoList", columns: ["name": .string])
        lists.membershipScope = MembershipScope(column: "id", members: members.name)
        var items = try TableConfiguration(name: "TodoItem")
        items.membershipScope = MembershipScope(column: "listId", members: members.name)
        return [members, lists, items]
    }

    struct Device: Sendable {
        let client: SyncClient
        let transport: AccountTests.Counting
        var members: SyncTable<JSONValue> { get throws { try client.syncTable("ListMember") } }
        var lists: SyncTable<JSONValue> { get throws { try client.syncTable("TodoList") } }
        var items: SyncTable<JSONValue> { get throws { try client.syncTable("TodoItem") } }

        /// Pulls the three tables, incrementally, and returns the items' pull.
        @discardableResult
        func pullAll() async throws -> PullSummary {
            try await members.pull(queryID: "members")
            try await lists.pull(queryID: "lists")
            return try await items.pull(queryID: "items")
        }

        func ids(_ table: SyncTable<JSONValue>) async throws -> Set<String> {
            Set(try await table.items().compactMap { $0["id"]?.stringValue })
        }
    }

    /// Runs `body` against a server of the three tables; `device` makes a user's client (pages of at most `pageSize`
    /// rows when given).
    static func withServer(
        pageSize: Int? = nil,
        _ body: @Sendable (_ device: @Sendable (String) async throws -> Device) async throws -> Void
    ) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(
            in: workspace, tables: try tables(), auth: AuthConfiguration(hs256Secret: secret)
        ) { url in
            try await body { user in
                let token = try await makeHS256Token(subject: user, secret: secret)
                let transport = AccountTests.Counting()
                let client = try await SyncClient.make(url, workspace: workspace, store: "\(user).sqlite") {
                    $0.transport = transport
                    $0.retryLimit = 3  // answers slow under the whole suite's load are retried (the clock is immediate)
                    $0.tokenProvider = { _ in token }
                    if let pageSize { ($0.pullPageSize, $0.maxPullPageSize) = (pageSize, pageSize) }
                }
                return Device(client: client, transport: transport)
            }
        }
    }

    static func member(_ id: String, list: String, user: String, role: String) -> JSONValue {
        ["id": .string(id), "listId": .string(list), "userId": .string(user), "role": .string(role)]
    }

    @Test func aDeviceRemovedWhileOfflineDropsTheListAndReportsItsPendingChanges() async throws {
        try await Self.withServer { device in
            let alice = try await device("alice")
            try await alice.members.insert(Self.member("m-alice", list: "groceries", user: "alice", role: "owner"))
            try await alice.lists.insert(["id": "groceries", "name": "Groceries"])
            for name in ["bread", "eggs", "tea"] {
                try await alice.items.insert(["id": .string(name), "listId": "groceries", "text": .string(name)])
            }
            try await alice.members.insert(Self.member("m-bob", list: "groceries", user: "bob", role: "editor"))
            try await alice.client.push()

            let bob = try await device("bob")
            try await bob.pullAll()
            #expect(try await bob.ids(bob.lists) == ["groceries"])
            #expect(try await bob.ids(bob.items) == ["bread", "eggs", "tea"])

            // Bob, offline, adds milk and changes the tea; meanwhile alice removes him.
            bob.transport.isDown.withLock { $0 = true }
            try await bob.items.insert(["id": "milk", "listId": "groceries", "text": "milk"])
            var tea = try #require(try await bob.items.item(id: ItemID("tea")))
            tea["text"] = "green tea"
            try await bob.items.update(tea)
            try await alice.members.delete(id: ItemID("m-bob"))
            try await alice.client.push()
            bob.transport.isDown.withLock { $0 = false }

            let summary = try await bob.pullAll()
            #expect(summary.removedCount == 2, "bread and eggs; milk and tea wait with their refusals")
            #expect(try await bob.ids(bob.lists).isEmpty, "the list is gone from bob's device")
            #expect(try await bob.ids(bob.members).isEmpty, "and its members, bob's own row too")
            #expect(try await bob.ids(bob.items) == ["milk", "tea"])
            let refused = try await bob.client.operationErrors()
            #expect(Set(refused.map(\.operation.itemID.rawValue)) == ["milk", "tea"])
            #expect(refused.first { $0.operation.itemID.rawValue == "milk" }?.status == 403, "a list he cannot write")
            #expect(
                refused.first { $0.operation.itemID.rawValue == "tea" }?.status == 404,
                "an out-of-scope row is as missing: a conflict with no server row")

            // Nobody else lost anything.
            try await alice.pullAll()
            #expect(try await alice.ids(alice.items) == ["bread", "eggs", "tea"])
            #expect(try await alice.items.item(id: ItemID("tea"))?["text"] == "tea")
            #expect(try await alice.ids(alice.members) == ["m-alice"])
        }
    }

    /// A device removed from a list: a pull of the members alone leaves the list on it without its owner; a pull of
    /// members and lists together (issue 49) removes the list and its members in one transaction, and a second one
    /// finds nothing (the scope token was kept with them).
    @Test func aDeviceRemovedFromAListLosesItWithItsMembersWhenPulledTogether() async throws {
        try await Self.withServer { device in
            let alice = try await device("alice")
            try await alice.members.insert(Self.member("m-alice", list: "groceries", user: "alice", role: "owner"))
            try await alice.lists.insert(["id": "groceries", "name": "Groceries"])
            try await alice.members.insert(Self.member("m-bob", list: "groceries", user: "bob", role: "editor"))
            try await alice.client.push()

            let bob = try await device("bob")
            let together = { [bob] in
                try await bob.client.pullTogether([
                    try bob.members.pulling(queryID: "members"), try bob.lists.pulling(queryID: "lists"),
                ])
            }
            #expect(try await together().isWhole)
            #expect(try await bob.ids(bob.lists) == ["groceries"])
            #expect(try await bob.ids(bob.members) == ["m-alice", "m-bob"])

            try await alice.members.delete(id: ItemID("m-bob"))
            try await alice.client.push()
            try await bob.members.pull(queryID: "members")
            #expect(try await bob.ids(bob.lists) == ["groceries"], "the half state: the list without its owner")
            #expect(try await bob.ids(bob.members).isEmpty)

            let summary = try await together()
            #expect(summary.isWhole)
            #expect(summary.tables.map(\.summary.removedCount) == [0, 1], "the list; its members went before")
            #expect(try await bob.ids(bob.lists).isEmpty)
            #expect(try await bob.ids(bob.members).isEmpty)
            let again = try await together()
            #expect(again.isWhole && again.passes == 1 && again.total.removedCount == 0)
        }
    }

    /// Found by `sync-chaos --shared` (seed 2): a device added to a list and removed again while one pull together ran
    /// — the members' rows of the list received in its first pass, the removal found in the second. The second listing
    /// of the scope did not drop what the first pass had kept, so the rows were stored with the new scope token, and no
    /// later pull looked again: the device held the list's members (and the list) for good.
    @Test func rowsKeptBeforeTheScopeShrankInThePullAreNotApplied() async throws {
        try await Self.withServer { device in
            let alice = try await device("alice")
            try await alice.members.insert(Self.member("m-alice", list: "groceries", user: "alice", role: "owner"))
            try await alice.lists.insert(["id": "groceries", "name": "Groceries"])
            try await alice.client.push()
            let bob = try await device("bob")
            let together = { [bob] in
                try await bob.client.pullTogether([
                    try bob.members.pulling(queryID: "members"), try bob.lists.pulling(queryID: "lists"),
                ])
            }
            try await together()
            try await alice.members.insert(Self.member("m-bob", list: "groceries", user: "bob", role: "editor"))
            try await alice.client.push()
            // Bob is removed right after his pull has read the members (pass 1), before it reads the lists.
            let removed = Locked(false)
            bob.transport.before.withLock {
                $0 = { request in
                    guard request.url.path.lowercased().hasSuffix("/tables/todolist"),
                        removed.withLock({
                            let first = !$0; $0 = true; return first
                        })
                    else { return }
                    try? await alice.members.delete(id: ItemID("m-bob"))
                    _ = try? await alice.client.push()
                }
            }
            let summary = try await together()
            #expect(summary.isWhole && summary.passes >= 2)
            #expect(try await bob.ids(bob.members).isEmpty, "no member row of a list bob is not in")
            #expect(try await bob.ids(bob.lists).isEmpty)
            #expect(try await together().total.removedCount == 0)
        }
    }

    /// A user removed between two pages of one pull and added back before the next: the page read in between showed
    /// only the user's own rows, and the cursor went past the other members' rows, for good (the token was the same
    /// before and after). A page whose token differs from the pull's is not used; the pull goes on from the last page
    /// it applied (alone) or kept (together). Failed before on both.
    @Test(arguments: [false, true]) func aScopeThatMovesBetweenTwoPagesLosesNoRow(together: Bool) async throws {
        try await Self.withServer(pageSize: 1) { device in
            let alice = try await device("alice")
            try await alice.members.insert(Self.member("m-alice", list: "groceries", user: "alice", role: "owner"))
            try await alice.lists.insert(["id": "groceries", "name": "Groceries"])
            for user in ["carol", "dave", "bob"] {
                try await alice.members.insert(Self.member("m-\(user)", list: "groceries", user: user, role: "editor"))
            }
            try await alice.client.push()
            let bob = try await device("bob")
            // Pages of one row: the members' second page is read with bob removed, the third with him back.
            let pages = Locked(0)
            bob.transport.before.withLock {
                $0 = { request in
                    guard request.url.path.lowercased().hasSuffix("/tables/listmember"),
                        !(request.url.query ?? "").contains("$select")
                    else { return }
                    switch pages.withLock({
                        $0 += 1; return $0
                    }) {
                    case 2:
                        try? await alice.members.delete(id: ItemID("m-bob"))
                        _ = try? await alice.client.push()
                    case 3:
                        try? await alice.members.insert(
                            Self.member("m-bob-2", list: "groceries", user: "bob", role: "editor"))
                        _ = try? await alice.client.push()
                    default: break
                    }
                }
            }
            if together {
                try await bob.client.pullTogether([
                    try bob.members.pulling(queryID: "members"), try bob.lists.pulling(queryID: "lists"),
                ])
            } else {
                try await bob.members.pull(queryID: "members")
            }
            bob.transport.before.withLock { $0 = nil }
            #expect(try await bob.ids(bob.members) == ["m-alice", "m-carol", "m-dave", "m-bob-2"])
        }
    }

    @Test func aRowMovedToAListTheUserIsNotInLeavesTheirDevice() async throws {
        try await Self.withServer { device in
            let alice = try await device("alice")
            for list in ["a", "b", "c"] {
                try await alice.members.insert(Self.member("m-alice-\(list)", list: list, user: "alice", role: "owner"))
                try await alice.lists.insert(["id": .string(list), "name": .string(list)])
            }
            for item in ["x", "y", "z", "w"] {
                try await alice.items.insert(["id": .string(item), "listId": "a", "text": .string(item)])
            }
            try await alice.members.insert(Self.member("m-bob-a", list: "a", user: "bob", role: "editor"))
            for list in ["a", "b"] {
                try await alice.members.insert(
                    Self.member("m-carol-\(list)", list: list, user: "carol", role: "viewer"))
            }
            try await alice.client.push()
            let (bob, carol) = (try await device("bob"), try await device("carol"))
            try await bob.pullAll()
            try await carol.pullAll()
            #expect(try await bob.ids(bob.items) == ["x", "y", "z", "w"])

            // While bob and carol do not sync: x goes to b, y to b then c, z to b and back to a.
            func move(_ id: String, to list: String) async throws {
                var item = try #require(try await alice.items.item(id: ItemID(id)))
                item["listId"] = .string(list)
                try await alice.items.update(item)
                try await alice.client.push()
            }
            try await move("x", to: "b")
            try await move("y", to: "b")
            try await move("y", to: "c")
            try await move("z", to: "b")
            try await move("z", to: "a")

            let bobs = try await bob.pullAll()
            #expect(bobs.removedCount == 2, "x and y left list a for lists bob is not in")
            #expect(try await bob.ids(bob.items) == ["z", "w"])
            #expect(try await bob.items.item(id: ItemID("z"))?["listId"] == "a")
            let carols = try await carol.pullAll()
            #expect(carols.removedCount == 1, "y left for list c, which carol is not in")
            #expect(try await carol.ids(carol.items) == ["x", "z", "w"])
            #expect(try await carol.items.item(id: ItemID("x"))?["listId"] == "b")
            // Settled: nothing more to remove.
            #expect(try await bob.pullAll().removedCount == 0)
        }
    }

    /// A claim-scoped table (`claimScope`): when the user's token names another tenant, the device drops the first
    /// tenant's rows on its next pull and brings the second's, older than its cursor as they are.
    @Test func aDeviceWhoseClaimChangesHoldsTheNewTenantsRows() async throws {
        let workspace = try Workspace()
        var tickets = try TableConfiguration(name: "Ticket")
        tickets.claimScope = ClaimScope(claim: "tenant", column: "tenantId")
        try await LiveServer.run(
            in: workspace, tables: [tickets], auth: AuthConfiguration(hs256Secret: Self.secret)
        ) { url in
            func token(_ tenant: String) async throws -> String {
                try await makeHS256Token(subject: "ann", secret: Self.secret, claims: ["tenant": .string(tenant)])
            }
            let globexToken = try await token("globex")
            let globex = try await SyncClient.make(url, workspace: workspace, store: "globex.sqlite") {
                $0.retryLimit = 3
                $0.tokenProvider = { _ in globexToken }
            }
            _ = try await globex.syncTable("Ticket").insert(contentsOf: [["id": "g1"], ["id": "g2"]])
            try await globex.push()

            let current = Locked(try await token("acme"))
            let device = try await SyncClient.make(url, workspace: workspace, store: "ann.sqlite") {
                $0.retryLimit = 3
                $0.tokenProvider = { _ in current.withLock { $0 } }
            }
            let tickets = try device.syncTable("Ticket")
            _ = try await tickets.insert(contentsOf: [["id": "a1"], ["id": "a2"], ["id": "a3"]])
            try await tickets.pull(queryID: "tickets")
            #expect(Set(try await tickets.items().compactMap { $0["id"]?.stringValue }) == ["a1", "a2", "a3"])

            let moved = try await token("globex")
            current.withLock { $0 = moved }
            let summary = try await tickets.pull(queryID: "tickets")
            #expect(summary.removedCount == 3)
            #expect(Set(try await tickets.items().compactMap { $0["id"]?.stringValue }) == ["g1", "g2"])
        }
    }

    @Test func aDeviceThatJoinsAListGetsAllItsRowsBehindItsCursors() async throws {
        try await Self.withServer { device in
            let alice = try await device("alice")
            let bob = try await device("bob")
            try await alice.members.insert(Self.member("m-alice", list: "work", user: "alice", role: "owner"))
            try await alice.lists.insert(["id": "work", "name": "Work"])
            _ = try await alice.items.insert(
                contentsOf: (0..<120).map {
                    ["id": .string("w\($0)"), "listId": "work", "text": .string("task \($0)")]
                })
            try await alice.client.push()
            // Bob has a list of his own, written after alice's rows: his cursors pass every one of them.
            try await bob.members.insert(Self.member("m-bob", list: "home", user: "bob", role: "owner"))
            try await bob.lists.insert(["id": "home", "name": "Home"])
            try await bob.items.insert(["id": "h0", "listId": "home", "text": "dishes"])
            try await bob.pullAll()
            #expect(try await bob.ids(bob.items) == ["h0"])

            try await alice.members.insert(Self.member("m-bob-work", list: "work", user: "bob", role: "viewer"))
            try await alice.client.push()
            let summary = try await bob.pullAll()
            #expect(summary.removedCount == 0)
            #expect(try await bob.ids(bob.items).count == 121, "every row of the list joined, and his own")
            #expect(try await bob.ids(bob.lists) == ["home", "work"])
            #expect(try await bob.ids(bob.members) == ["m-alice", "m-bob", "m-bob-work"])

            // Pulls after that are incremental again: nothing to reconcile, nothing more to fetch.
            let again = try await bob.pullAll()
            #expect(again.appliedCount == 0 && again.removedCount == 0)
        }
    }
}

/// The flips of membership during one pull, on the default wire only: the checks are the client's, the same on either
/// dialect, and it costs 64 pulls (in the one whole-suite run that had it in `SharingTests`, on both dialects, a test
/// beside it went unanswered for 4 × 30 s).
@Suite(.timeLimit(.minutes(3))) struct MembershipFlipTests {
    /// Every way a user's membership can flip (shared, unshared, shared again …) before the first six requests of one
    /// pull of lists and members together: whatever the pull applies, a list the device holds comes with its owner's
    /// member row (the check `sync-chaos --shared` makes of every device read), and the next pull leaves the device
    /// holding the list exactly when the user is a member. Each of the 64 patterns has its own user and list.
    ///
    /// Found by `sync-chaos --shared --postgres` (seed 3, 4 × 40, v2: a device read a list without its owner). The
    /// first page asked again after a listing of the scope carried a token of its own that nobody read: a user removed
    /// between the listing and that page, and added back before the next, left the members pulled without the list's
    /// owner row while the store kept the listing's token, so no later pull asked for that row again (6 of the 64
    /// patterns failed before, two of them still after the next pull; 256 patterns over 8 requests pass now).
    @Test func noFlipOfMembershipDuringAPullTogetherShowsAListWithoutItsOwner() async throws {
        try await SharingTests.withServer { device in
            let alice = try await device("alice")
            for pattern in 0..<64 {
                let (list, user) = ("list-\(pattern)", "bob-\(pattern)")
                try await alice.members.insert(
                    SharingTests.member("owner-\(pattern)", list: list, user: "alice", role: "owner"))
                try await alice.lists.insert(["id": .string(list), "name": .string(list)])
                try await alice.client.push()
                let bob = try await device(user)
                let together = { [bob] in
                    try await bob.client.pullTogether([
                        try bob.members.pulling(queryID: "members"), try bob.lists.pulling(queryID: "lists"),
                    ])
                }
                try await together()
                let state = Locked((request: 0, member: 0, rows: 0))  // rows: member rows made so far
                bob.transport.before.withLock {
                    $0 = { request in
                        guard request.method == "GET" else { return }
                        let (flips, id, adds): (Bool, String, Bool) = state.withLock {
                            $0.request += 1
                            guard $0.request <= 6, pattern & (1 << ($0.request - 1)) != 0 else {
                                return (false, "", false)
                            }
                            let adds = $0.member == 0
                            if adds { $0.rows += 1 }
                            $0.member = adds ? 1 : 0
                            return (true, "m-\(user)-\($0.rows)", adds)
                        }
                        guard flips else { return }
                        if adds {
                            let row = SharingTests.member(id, list: list, user: user, role: "editor")
                            try? await alice.members.insert(row)
                        } else {
                            try? await alice.members.delete(id: ItemID(id))
                        }
                        _ = try? await alice.client.push()
                    }
                }
                let summary = try await together()
                bob.transport.before.withLock { $0 = nil }
                let (lists, members) = (try await bob.ids(bob.lists), try await bob.ids(bob.members))
                #expect(
                    !lists.contains(list) || members.contains("owner-\(pattern)"),
                    "pattern \(pattern): a list without its owner (\(summary.passes) passes, whole: \(summary.isWhole))"
                )
                try await together()
                let isMember = state.withLock { $0.member == 1 }
                #expect(
                    try await bob.ids(bob.lists).contains(list) == isMember,
                    "pattern \(pattern) after the next pull")
            }
        }
    }
}
