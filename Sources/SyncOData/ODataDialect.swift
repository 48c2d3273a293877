/// The OData dialect of a table request: the one of the v2 protocol (`ZUMO-API-VERSION: 2.0.x`, OData v3 syntax,
/// PROTOCOL.md §4) or of the Datasync protocol (`3.0.x`, OData v4 syntax, PROTOCOL-v3.md §4).
///
/// The two differ in a few forms only. Under ``v3``: `$count=true` asks for the count (`$inlinecount` is
/// ignored), unknown `$` options are ignored rather than refused, dates are `cast(…,Edm.DateTimeOffset)` (the
/// v2 literals `datetime'…'`, `datetimeoffset'…'` and `guid'…'` are refused, as is `substringof`), and
/// `field in ('a','b')` is taken. The rest of the grammar and every function's meaning are shared.
public enum ODataDialect: String, Sendable, Hashable, CaseIterable {
    /// OData v3 syntax, as Azure Mobile Apps 2.0.0 speaks it.
    case v2
    /// OData v4 syntax, as the Datasync Community Toolkit speaks it.
    case v3
}
