import SyncCore

/// Where an incremental pull stands: the greatest `(updatedAt, id)` already applied — or, without an id, an instant
/// from which every row is still to read (a position imported from the Azure Mobile Apps SDK, whose delta token was
/// an `updatedAt` alone).
struct PullCursor: Sendable, Hashable, Codable {
    /// The last applied row's `updatedAt`.
    var updatedAt: WireDate
    /// The last applied row's id; nil when every row updated at `updatedAt` is still to read.
    var itemID: ItemID?

    /// Creates a cursor.
    ///
    /// - Parameters:
    ///   - updatedAt: The last applied row's `updatedAt`.
    ///   - itemID: The last applied row's id, or nil.
    init(updatedAt: WireDate, itemID: ItemID?) {
        self.updatedAt = updatedAt
        self.itemID = itemID
    }
}
