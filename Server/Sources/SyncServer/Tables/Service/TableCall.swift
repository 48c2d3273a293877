import Logging
import SyncCore
import SyncOData

/// Who asks what of a table, as the table service sees it: the caller, the table and the item the route named, and
/// the logger — no request, no response. Each route (the table routes of both dialects, `/batch`'s operations, the
/// attachments, the change feed, the console) makes one from its context (``SyncRequestContext/call``), and every rule
/// is decided from it.
struct TableCall: Sendable {
    /// Who called, when the request carried a valid token.
    var caller: Caller?
    /// The table's name as the route gave it (not yet checked).
    var table: String
    /// The item id as the route's path gave it (percent-encoded, not yet checked); nil on a table's URL.
    var item: String?
    var logger: Logger
    /// The dialect the request speaks.
    var dialect: ODataDialect

    init(caller: Caller?, table: String, item: String?, logger: Logger, dialect: ODataDialect = .v2) {
        self.caller = caller
        self.table = table
        self.item = item
        self.logger = logger
        self.dialect = dialect
    }
}
