public import SyncCore

/// Where an incremental pull stands: the greatest `(updatedAt, id)` already applied.
public struct PullCursor: Sendable, Hashable, Codable {
    /// The last applied row's `updatedAt`.
    public var updatedAt: WireDate
    /// The last applied row's id.
    public var itemID: ItemID

    /// Creates a cursor.
    ///
    /// - Parameters:
    ///   - updatedAt: The last applied row's `updatedAt`.
    ///   - itemID: The last applied row's id.
    public init(updatedAt: WireDate, itemID: ItemID) {
        self.updatedAt = updatedAt
        self.itemID = itemID
    }
}
