import SyncCore
import SyncOData
import SyncSQL

/// A translator with a plain, a numeric and a case-insensitive column, as a table's schema gives one.
let columns: [String: SQLColumn] = {
    var title = SQLColumn(name: "title", type: .string)
    title.collation = .caseInsensitive
    title.collationKeyColumn = "__ck_title"
    return [
        "text": SQLColumn(name: "text", type: .string), "count": SQLColumn(name: "count", type: .integer),
        "title": title, "__ck_title": SQLColumn(name: "__ck_title", type: .string),
    ]
}()

/// One input: a query string in both dialects; a filter that parses is translated for both databases.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOData(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    for dialect in [ODataDialect.v2, .v3] {
        guard let query = try? ODataQuery(parsing: text, dialect: dialect) else { continue }
        _ = query.queryString(dialect: dialect)
        guard let filter = query.filter else { continue }
        for database in [SQLDialect.sqlite, .postgres] {
            _ = try? SQLTranslator(dialect: database) { columns[$0] }.predicate(filter)
        }
    }
    return 0
}
