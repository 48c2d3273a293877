public import SyncCore
import SyncOData

/// What one removal of tombstones did (``TableStore/removeTombstones(of:before:limit:)``).
public struct TombstoneRemoval: Sendable, Equatable {
    /// How many tombstones it removed.
    public var removed: Int
    /// The table's horizon after it: the newest `updatedAt` among every tombstone removed so far, or nil when none was.
    public var horizon: WireDate?

    /// Creates a removal.
    ///
    /// - Parameters:
    ///   - removed: How many tombstones it removed.
    ///   - horizon: The table's horizon after it.
    public init(removed: Int, horizon: WireDate?) {
        self.removed = removed
        self.horizon = horizon
    }
}

extension TombstoneRemoval {
    /// How long the ids of removed tombstones are remembered after the removal's cutoff: one retention more, and a day
    /// at least. An insert sent again after a lost reply whose id is among them landed, and was deleted since
    /// (``TableStore/removedTrace(of:in:since:)``); only ids, so a day of a busy table's deletes costs little.
    static func idMemory(after retention: Duration) -> Duration { max(retention, .seconds(86_400)) }
}

/// The rule of the horizon (docs/retention.md), decided once for every route and dialect: a query that includes
/// deleted rows is a sync pull, and its filter's bound on `updatedAt` is its cursor — v2's
/// `updatedAt ge datetimeoffset'…'`, v3's `updatedAt gt cast(…)`, the keyset
/// `(updatedAt gt T) or ((updatedAt eq T) and (id gt I))`, and the same filter on every `$skip` page. A pull whose
/// cursor is older than the table's horizon, or that has none, may have missed tombstones that are gone now: changes
/// alone cannot answer it.
enum PullHorizon {
    /// The horizon to tell the caller of `query`, read with its page: `horizon` when the query is a pull that
    /// changes alone cannot answer, else nil.
    static func behind(_ query: ODataQuery, horizon: WireDate?) -> WireDate? {
        guard let horizon, query.includeDeleted else { return nil }
        if let bound = lowerBound(query.filter), !(bound < horizon) { return nil }
        return horizon
    }

    /// Whether `query` is an incremental pull whose cursor is older than `horizon`: a device that held rows since
    /// then and may keep some that were deleted. (A pull without a cursor is a first download, and misses nothing.)
    static func isStale(_ query: ODataQuery, horizon: WireDate?) -> Bool {
        guard let horizon, query.includeDeleted, let bound = lowerBound(query.filter) else { return false }
        return bound < horizon
    }

    /// Whether a page of `query` carries a watermark (``QueryPage/watermark``, on its last page): a pull of a table with
    /// a retention.
    static func hasWatermark(_ query: ODataQuery, _ configuration: TableConfiguration) -> Bool {
        query.includeDeleted && configuration.tombstoneRetention != nil
    }

    /// The feature code (`X-ZUMO-FEATURES`) of a client that reconciles by itself when told the horizon [ours]: the
    /// OfflineSync SDK sends it on its pulls.
    static let reconcilesFeature = "HZ"

    /// The smallest `updatedAt` a row matching `filter` may have, when the filter says one: the greatest bound of the
    /// terms of an `and`, the smallest of the two sides of an `or` (when both have one); nil when the filter does not
    /// bound `updatedAt` from below.
    static func lowerBound(_ filter: ODataExpression?) -> WireDate? {
        guard let filter else { return nil }
        switch filter {
        case .binary(.and, let left, let right):
            switch (lowerBound(left), lowerBound(right)) {
            case (let left?, let right?): return max(left, right)
            case (let one?, nil), (nil, let one?): return one
            case (nil, nil): return nil
            }
        case .binary(.or, let left, let right):
            guard let left = lowerBound(left), let right = lowerBound(right) else { return nil }
            return min(left, right)
        case .binary(let op, .member(let member), .literal(.date(let date, _)))
        where member == SystemProperty.updatedAt.rawValue && [.gt, .ge, .eq].contains(op):
            return date
        case .binary(let op, .literal(.date(let date, _)), .member(let member))
        where member == SystemProperty.updatedAt.rawValue && [.lt, .le, .eq].contains(op):
            return date
        default:
            return nil
        }
    }
}
