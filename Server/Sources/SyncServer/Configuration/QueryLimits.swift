import SyncOData

/// Bounds on what one query may ask of the database, beyond the filter's node count: a query past
/// one is a 400 that names the limit.
///
/// For example:
/// ```swift
/// var configuration = SyncServerConfiguration()
/// configuration.queryLimits.maxOrderByKeys = 4
/// ```
public struct QueryLimits: Sendable, Hashable {
    /// The most `$orderby` keys (a field may appear once). Default 8: each key is another sort of
    /// every matching row (900 repeats of one text field took 2.75 GB).
    public var maxOrderByKeys = 8
    /// The most string work a `$filter` may ask for: each string function (`concat`, `substring`,
    /// `tolower`, `contains`, …) costs one per field it reads, directly or through other functions,
    /// since each may copy a whole field per row. Default 100: a filter with 100 `contains(field, '…')`
    /// passes; `length(concat(concat(…)))` over 256 fields (1.6 GB on SQLite) does not.
    public var maxFilterWork = 100
    /// The most bytes of JSON rows in one page: a page ends after the row that passes it, with a next
    /// link, so that a page of large rows is not built whole in memory (50 rows of 1 MiB would be one 50 MiB
    /// body). Default 8 MiB.
    public var maxPageBytes = 8 << 20

    /// The defaults.
    public init() {}

    /// Checks `query` against the limits.
    ///
    /// - Returns: Why the query is refused, or nil.
    func refusal(_ query: ODataQuery) -> String? {
        var seen: Set<String> = []
        for ordering in query.orderBy where !seen.insert(ordering.field.lowercased()).inserted {
            return "$orderby lists '\(ordering.field)' more than once"
        }
        if query.orderBy.count > maxOrderByKeys {
            return "$orderby has \(query.orderBy.count) keys; at most \(maxOrderByKeys) are allowed"
        }
        if let filter = query.filter {
            let work = Self.work(filter).work
            if work > maxFilterWork {
                return "$filter asks for too much string work (\(work); at most \(maxFilterWork)): use fewer string "
                    + "functions or fewer fields inside them"
            }
        }
        return nil
    }

    /// The string work of `expression`, and how many field reads it holds.
    static func work(_ expression: ODataExpression) -> (work: Int, fields: Int) {
        switch expression {
        case .literal: return (0, 0)
        case .member: return (0, 1)
        case .not(let inner), .negate(let inner): return work(inner)
        case .binary(_, let left, let right):
            let (l, r) = (work(left), work(right))
            return (l.work &+ r.work, l.fields &+ r.fields)
        case .function(let function, let arguments):
            let inner = arguments.map(work)
            let fields = inner.reduce(0) { $0 &+ $1.fields }
            var total = inner.reduce(0) { $0 &+ $1.work }
            switch function {
            case .year, .month, .day, .hour, .minute, .second, .round, .floor, .ceiling: break
            default: total = total &+ max(1, fields)
            }
            return (total, fields)
        }
    }
}
