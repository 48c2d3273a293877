package import SyncOData

/// Which items of a table, in what order, how many: the one query type of ``SyncTable`` (local reads, pulls,
/// purges) and ``RemoteTable`` (server reads). It renders to the protocol's OData options.
///
/// Write filters and orderings against the model, or by field name where the model cannot say (a field the model
/// does not decode, a nested path):
/// ```swift
/// let open = TableQuery<TodoItem>()
///     .filter { $0.complete == false && $0.text.startsWith("Buy") }
///     .orderBy(\.text)
///     .top(50)
/// open.queryString   // $filter=((complete%20eq%20false)%20and%20startswith(text,'Buy'))&$orderby=text%20asc&$top=50
/// let byName = TableQuery<TodoItem>().filter(.field("text") == "Buy milk")
/// ```
///
/// Model fields are named as the model codes them (its `CodingKeys`). A key path that names no single coded
/// field (a nested path, a computed property over several fields) makes the query throw `ValueError` when it
/// runs; ``problems`` lists them before that.
public struct TableQuery<Item>: Sendable, CustomStringConvertible {
    /// The OData form.
    package var odata = ODataQuery()
    /// Why a key path used in this query names no field; the query throws when it runs unless empty.
    public private(set) var problems: [String] = []

    /// A query of every item, in the store's order (the server's for remote reads).
    public init() {}

    /// This query narrowed by `condition`, joined with `and` to the filter it had.
    ///
    /// - Parameter condition: The condition items must meet.
    /// - Returns: The narrowed query.
    public func filter(_ condition: QueryExpression) -> TableQuery {
        var query = self
        query.odata.filter = odata.filter.map { .binary(.and, $0, condition.expression) } ?? condition.expression
        return query
    }

    /// This query narrowed by a condition written against the model: `$0.complete == false`.
    ///
    /// - Parameter condition: Builds the condition from the model's fields (`$0.text`, `$0.dueDate`…).
    /// - Returns: The narrowed query.
    public func filter(_ condition: (QueryFields<Item>) -> QueryExpression) -> TableQuery where Item: Decodable {
        let fields = QueryFields<Item>()
        var query = filter(condition(fields))
        query.problems += fields.problems.problems
        return query
    }

    /// This query with one more sort key, by field name.
    ///
    /// - Parameters:
    ///   - field: The field to sort on.
    ///   - direction: The direction; ascending by default.
    /// - Returns: The query with the key appended.
    public func orderBy(_ field: String, _ direction: SortDirection = .ascending) -> TableQuery {
        var query = self
        query.odata.orderBy.append(ODataOrdering(field, direction == .ascending ? .ascending : .descending))
        return query
    }

    /// This query with one more sort key: `.orderBy(\.text)`.
    ///
    /// - Parameters:
    ///   - field: The model's property to sort on.
    ///   - direction: The direction; ascending by default.
    /// - Returns: The query with the key appended.
    public func orderBy<Value: Equatable>(_ field: KeyPath<Item, Value>, _ direction: SortDirection = .ascending)
        -> TableQuery where Item: Decodable
    {
        switch FieldNames.name(of: field) {
        case .success(let name):
            return orderBy(name, direction)
        case .failure(let failure):
            var query = self
            query.problems.append(failure.message)
            return query
        }
    }

    /// This query skipping the first `count` matching items.
    ///
    /// - Parameter count: How many items to skip.
    /// - Returns: The query with `$skip` set.
    public func skip(_ count: Int) -> TableQuery {
        var query = self
        query.odata.skip = count
        return query
    }

    /// This query returning at most `count` items.
    ///
    /// - Parameter count: The most items to return.
    /// - Returns: The query with `$top` set.
    public func top(_ count: Int) -> TableQuery {
        var query = self
        query.odata.top = count
        return query
    }

    /// The query as OData options, as a URL query string (`$filter=…&$orderby=…`), for logs and for comparing
    /// with a server's logs.
    public var queryString: String { odata.queryString }

    /// The query string, or what is wrong with the query.
    public var description: String {
        problems.isEmpty ? queryString : "invalid query: \(problems.joined(separator: "; "))"
    }

    /// The OData form, or `ValueError` when a key path named no field.
    func checked() throws -> ODataQuery {
        if let problem = problems.first { throw ValueError(kind: "query", reason: problem) }
        return odata
    }
}

/// The direction of a sort key.
public enum SortDirection: Sendable, Hashable {
    /// Smallest first (`asc`).
    case ascending
    /// Largest first (`desc`).
    case descending
}

/// The fields of a model, for a filter written against it: `$0.complete == false`, `$0.text.startsWith("Buy")`.
///
/// Each property read gives the ``QueryExpression`` of the field it is coded as.
@dynamicMemberLookup
public struct QueryFields<Item: Decodable> {
    /// Key paths that named no field (a class, so the filter's closure may record into it).
    final class Problems {
        var problems: [String] = []
    }

    let problems = Problems()

    /// The field `keyPath` reads, as an expression.
    ///
    /// - Parameter keyPath: A stored property of the model.
    /// - Returns: The field's expression; for a key path that names no single coded field, a placeholder, and
    ///   the query that uses it throws `ValueError` when it runs.
    public subscript<Value: Equatable>(dynamicMember keyPath: KeyPath<Item, Value>) -> QueryExpression {
        switch FieldNames.name(of: keyPath) {
        case .success(let name):
            return .field(name)
        case .failure(let failure):
            problems.problems.append(failure.message)
            return .field("\(keyPath)")
        }
    }
}
