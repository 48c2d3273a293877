import SyncCore

/// Where an incremental pull stands: the greatest `(updatedAt, id)` already applied.
struct PullCursor: Sendable, Hashable, Codable {
    /// The last applied row's `updatedAt`.
    var updatedAt: WireDate
    /// The last applied row's id.
    var itemID: ItemID

    /// Creates a cursor.
    ///
    /// - Parameters:
    ///   - updatedAt: The last applied row's `updatedAt`.
    ///   - itemID: The last applied row's id.
    init(updatedAt: WireDate, itemID: ItemID) {
        self.updatedAt = updatedAt
        self.itemID = itemID
    }
}
