import TestSupport
import Testing

/// The consistency checks of `sync-chaos` (docs/consistency.md) catch what they claim to: each planted violation is
/// found, and the same history without it passes.
@Suite(.timeLimit(.minutes(3))) struct ConsistencyCheckTests {
    typealias Read = DeviceHistory.ReadItem

    static func read(_ text: String, done: Bool = false, at stamp: String) -> [String: Read] {
        ["item-1": Read(fields: ["text": text, "complete": String(done)], stamp: stamp)]
    }

    /// A write acknowledged, then a read before the next sync that does not show it: a lost own write.
    @Test func aLostOwnWriteIsFound() {
        let lost = DeviceHistory([
            .read(Self.read("milk", at: "2026-11-28T10:00:00.000Z")),
            .wrote(item: "item-1", field: "text", value: "oat milk"),
            .read(Self.read("milk", at: "2026-11-28T10:00:00.000Z")),
        ])
        #expect(lost.readYourWrites().count == 1)
        let kept = DeviceHistory([
            .wrote(item: "item-1", field: "text", value: "oat milk"),
            .read(Self.read("oat milk", at: "2026-11-28T10:00:00.000Z")),
            // After a sync another device's later value may rightly stand.
            .synced,
            .read(Self.read("soy milk", at: "2026-11-28T10:00:05.000Z")),
        ])
        #expect(kept.readYourWrites().isEmpty)
        let gone = DeviceHistory([.wrote(item: "item-1", field: "complete", value: "true"), .read([:])])
        #expect(gone.readYourWrites().count == 1)
        let unsure = DeviceHistory([
            .wrote(item: "item-1", field: "text", value: "oat milk"), .unsure(item: "item-1"), .read([:]),
        ])
        #expect(unsure.readYourWrites().isEmpty)
    }

    /// A list without its owner, or an owner without its list, on the server: a half-applied change set — unless its
    /// maker's device speaks v3 (sent one by one by design, docs/consistency.md).
    @Test func aHalfAppliedSetIsFound() {
        let atomic: Set = ["user-0"]
        let whole = SetWatcher.halfSets(
            lists: ["l1": "list of user-0", "l2": "list 2 of user-0"], owners: ["l1": "user-0", "l2": "user-0"],
            atomicUsers: atomic)
        #expect(whole.isEmpty)
        let listAlone = SetWatcher.halfSets(
            lists: ["l1": "list of user-0", "l2": "list 2 of user-0"], owners: ["l1": "user-0"], atomicUsers: atomic)
        #expect(listAlone == ["list l2 (list 2 of user-0) without its owner"])
        let ownerAlone = SetWatcher.halfSets(lists: [:], owners: ["l3": "user-0"], atomicUsers: atomic)
        #expect(ownerAlone == ["owner user-0 of list l3 without the list"])
        let oneByOne = SetWatcher.halfSets(
            lists: ["l4": "list of user-1"], owners: ["l5": "user-1"], atomicUsers: atomic)
        #expect(oneByOne.isEmpty)
    }

    /// A read of an older version of an item after a newer one: a stale read.
    @Test func aStaleReadAfterANewerOneIsFound() {
        let stale = DeviceHistory([
            .read(Self.read("oat milk", at: "2026-11-28T10:00:05.000Z")),
            .synced,
            .read(Self.read("milk", at: "2026-11-28T10:00:00.000Z")),
        ])
        #expect(stale.monotonicReads().count == 1)
        let fresh = DeviceHistory([
            .read(Self.read("milk", at: "2026-11-28T10:00:00.000Z")),
            // A local edit keeps the stamp it was made over.
            .wrote(item: "item-1", field: "text", value: "oat milk"),
            .read(Self.read("oat milk", at: "2026-11-28T10:00:00.000Z")),
            .synced,
            .read(Self.read("oat milk", at: "2026-11-28T10:00:05.000Z")),
        ])
        #expect(fresh.monotonicReads().isEmpty && fresh.readYourWrites().isEmpty)
    }
}
