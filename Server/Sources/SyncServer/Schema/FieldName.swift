import SyncCore
import SyncSQL

/// The rules for user field names, which become column names.
enum FieldName {
    /// Why `name` cannot be a user field, or nil when it can: 1–63 ASCII letters, digits and `_`,
    /// starting with a letter or `_`; not `__`-prefixed (reserved); not a system property in other case.
    static func validate(_ name: String) -> String? {
        if SystemProperty.isReserved(name) { return "names starting with '__' are reserved" }
        if SQLDialect.sqlite.quotedIdentifier(name) == nil {
            return "use 1–128 letters, digits and '_', starting with a letter"
        }
        // PostgreSQL truncates longer identifiers; the limit holds on every store, so that both behave the same.
        if name.utf8.count > 63 { return "use at most 63 characters" }
        let lowered = name.lowercased()
        if let system = SystemProperty.allCases.first(where: { $0.rawValue.lowercased() == lowered }) {
            return "it differs from the system property '\(system.rawValue)' only in case"
        }
        return nil
    }
}
