import Foundation
import SyncCore

/// The options of a table query: `$filter`, `$orderby`, `$skip`, `$top`, `$select`,
/// `$inlinecount` and `__includeDeleted` (PROTOCOL.md §4).
///
/// Render one with ``queryString``, or read one from a request with ``init(parsing:)``. Apps build queries
/// with the SDK's `TableQuery`, which renders to this.
public struct ODataQuery: Sendable, Hashable {
    /// The rows to return; nil for all rows.
    public var filter: ODataExpression?
    /// The sort order, most significant first.
    public var orderBy: [ODataOrdering]
    /// How many matching rows to skip; nil for none.
    public var skip: Int?
    /// The most rows to return; nil for the server's page size.
    public var top: Int?
    /// The fields to return; nil for all. Servers always add the system properties.
    public var select: [String]?
    /// Whether to ask for the total count of matching rows (`$inlinecount=allpages`).
    public var includeTotalCount: Bool
    /// Whether soft-deleted rows (tombstones) are returned too (`__includeDeleted=true`).
    public var includeDeleted: Bool

    /// Creates a query; with no arguments, one that matches every row.
    ///
    /// - Parameters:
    ///   - filter: The rows to return; nil for all rows.
    ///   - orderBy: The sort order, most significant first.
    ///   - skip: How many matching rows to skip.
    ///   - top: The most rows to return.
    ///   - select: The fields to return; nil for all.
    ///   - includeTotalCount: Whether to ask for the total count.
    ///   - includeDeleted: Whether tombstones are returned too.
    public init(
        filter: ODataExpression? = nil,
        orderBy: [ODataOrdering] = [],
        skip: Int? = nil,
        top: Int? = nil,
        select: [String]? = nil,
        includeTotalCount: Bool = false,
        includeDeleted: Bool = false
    ) {
        self.filter = filter
        self.orderBy = orderBy
        self.skip = skip
        self.top = top
        self.select = select
        self.includeTotalCount = includeTotalCount
        self.includeDeleted = includeDeleted
    }
}

/// One key of a sort order: a field and a direction.
public struct ODataOrdering: Sendable, Hashable {
    /// The sort direction.
    public enum Direction: String, Sendable, Hashable {
        /// Smallest first (`asc`).
        case ascending = "asc"
        /// Largest first (`desc`).
        case descending = "desc"
    }

    /// The field, possibly a path such as `address/city`.
    public var field: String
    /// The direction.
    public var direction: Direction

    /// Creates a sort key.
    ///
    /// - Parameters:
    ///   - field: The field to sort on.
    ///   - direction: The direction; ascending by default.
    public init(_ field: String, _ direction: Direction = .ascending) {
        self.field = field
        self.direction = direction
    }

    /// The key as OData text, such as `name asc`.
    public var odataText: String { "\(field) \(direction.rawValue)" }
}

extension ODataQuery {
    /// This query with one more sort key.
    ///
    /// - Parameters:
    ///   - field: The field to sort on.
    ///   - direction: The direction; ascending by default.
    /// - Returns: The query with the key appended.
    public func orderBy(_ field: String, _ direction: ODataOrdering.Direction = .ascending) -> ODataQuery {
        var query = self
        query.orderBy.append(ODataOrdering(field, direction))
        return query
    }

    /// This query skipping the first `count` matching rows.
    ///
    /// - Parameter count: How many rows to skip.
    /// - Returns: The query with `$skip` set.
    public func skip(_ count: Int) -> ODataQuery {
        var query = self
        query.skip = count
        return query
    }

    /// This query returning at most `count` rows.
    ///
    /// - Parameter count: The most rows to return.
    /// - Returns: The query with `$top` set.
    public func top(_ count: Int) -> ODataQuery {
        var query = self
        query.top = count
        return query
    }

    /// This query returning only the given fields (and the system properties).
    ///
    /// - Parameter fields: The fields to return.
    /// - Returns: The query with `$select` set.
    public func select(_ fields: [String]) -> ODataQuery {
        var query = self
        query.select = fields
        return query
    }

    /// This query asking for the total count of matching rows (`$inlinecount=allpages`).
    ///
    /// - Returns: The query with the count requested.
    public func includingTotalCount() -> ODataQuery {
        var query = self
        query.includeTotalCount = true
        return query
    }

    /// This query returning soft-deleted rows too (`__includeDeleted=true`).
    ///
    /// - Returns: The query with tombstones included.
    public func includingDeleted() -> ODataQuery {
        var query = self
        query.includeDeleted = true
        return query
    }
}
