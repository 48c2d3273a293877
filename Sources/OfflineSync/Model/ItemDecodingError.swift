public import SyncCore

/// A local row that does not fit the app's type — a field another client left out or set to null, or wrote with
/// another type: which table and row, which field, and why. A typed read (``SyncTable/items(matching:)``,
/// ``SyncTable/item(id:)``, an observation) throws it for the first such row; the row itself is untouched, and
/// reading the table as `JSONValue` shows it whole. A model that declares the field optional (or decodes it with a
/// default) reads such rows.
public struct ItemDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The table, when the read named one.
    public var table: TableName?
    /// The row's id, when it has one.
    public var itemID: String?
    /// The field that did not fit, as a dotted path (`complete`, `address.city`); empty for the row as a whole.
    public var field: String
    /// Why, in a few words (`no value (null or absent) where Bool is expected`).
    public var reason: String

    /// One line, naming the row and the field, without their values.
    public var description: String {
        let row = itemID.map { "Row '\($0)'" } ?? "A row"
        let place = table.map { " of \($0)" } ?? ""
        let what = field.isEmpty ? "" : " field '\(field)':"
        return "\(row)\(place) does not fit the app's type:\(what) \(reason)"
    }

    /// The error for `value`, which failed to decode with `error`.
    static func decoding(_ value: JSONValue, table: TableName?, error: DecodingError) -> ItemDecodingError {
        func path(_ context: DecodingError.Context, _ last: (any CodingKey)? = nil) -> String {
            (context.codingPath + (last.map { [$0] } ?? [])).map { $0.intValue.map(String.init) ?? $0.stringValue }
                .joined(separator: ".")
        }
        let (field, reason): (String, String)
        switch error {
        case .valueNotFound(let type, let context):
            (field, reason) = (path(context), "no value (null or absent) where \(type) is expected")
        case .keyNotFound(let key, let context):
            (field, reason) = (path(context, key), "absent, and the type needs it")
        case .typeMismatch(let type, let context):
            let found = context.codingPath.reduce(Optional(value)) { value, key in
                key.intValue.map { index in value?.arrayValue.flatMap { index < $0.count ? $0[index] : nil } }
                    ?? value?[key.stringValue]
            }
            (field, reason) = (path(context), found == .null ? "null where \(type) is expected" : "not a \(type)")
        case .dataCorrupted(let context):
            (field, reason) = (path(context), context.debugDescription)
        @unknown default:
            (field, reason) = ("", "\(error)")
        }
        return ItemDecodingError(table: table, itemID: value["id"]?.stringValue, field: field, reason: reason)
    }
}
