public import SyncCore

/// What a conflicting update does with a field both sides changed to different values (<doc:HandlingConflicts>).
///
/// Fields changed on one side only never need it: the three-way merge keeps the local change and the server's.
/// Set per table in ``SyncClient/Configuration/fieldConflicts``.
public enum FieldConflictPolicy: Sendable {
    /// The conflict is shown to the app (as an ``OperationError`` naming the fields), as without a merge: the
    /// default.
    case surface
    /// The server's value of each such field is kept.
    case serverWins
    /// The local value of each such field is pushed over the server's.
    case clientWins
    /// `resolve` decides each such field: it gets the field's name and its base, local and server values (null when
    /// absent) and returns the value to push.
    case resolve(@Sendable (_ field: String, _ base: JSONValue, _ mine: JSONValue, _ theirs: JSONValue) -> JSONValue)
}

/// The three-way merge of a row (issue 47), as a value: the base (the row as the server last gave it before the
/// local changes), mine (the local row) and theirs (the server's row now). No I/O, so every cell is tested alone.
///
/// | local field vs base | server field vs base | merged                                     |
/// |---------------------|----------------------|--------------------------------------------|
/// | same                | same                 | the base's                                 |
/// | changed             | same                 | mine                                       |
/// | same                | changed              | theirs                                     |
/// | changed             | changed, equal       | theirs (the same value)                    |
/// | changed             | changed, different   | a conflict: the table's ``FieldConflictPolicy`` decides |
///
/// A field absent from a row is null there: clearing a field is a change to null. System properties are the
/// server's (theirs). A delete on either side is not merged: it stays a conflict.
enum FieldMerge {
    /// A merge: the merged row (with theirs where a field conflicts) and the fields in conflict, in name order.
    struct Outcome: Sendable, Equatable {
        var merged: JSONValue
        var conflicts: [String]
    }

    /// The user fields of `row` that differ from `base`, each with its value in `row` (null: cleared).
    static func changes(of row: JSONValue, since base: JSONValue) -> [String: JSONValue] {
        var changes: [String: JSONValue] = [:]
        for name in userFieldNames(row, base) where (row[name] ?? .null) != (base[name] ?? .null) {
            changes[name] = row[name] ?? .null
        }
        return changes
    }

    /// What a change sends when only what changed goes (a v2 `PATCH`): the id and the fields `row` changed since
    /// `base`, each cleared one as an explicit null.
    static func patch(_ row: JSONValue, since base: JSONValue) -> JSONValue {
        var body = changes(of: row, since: base)
        body[SystemProperty.id.rawValue] = row[SystemProperty.id.rawValue]
        return .object(body)
    }

    /// The base of a merge after a send that may have been applied: each user field that `sent` changed from `base`
    /// and that `theirs` holds with the sent value takes that value — the server holds this device's own change.
    static func base(_ base: JSONValue, sent: JSONValue?, theirs: JSONValue) -> JSONValue {
        guard let sent else { return base }
        var rebased = base
        for name in userFieldNames(sent) {
            let value = sent[name] ?? .null
            if value != (base[name] ?? .null), value == (theirs[name] ?? .null) { rebased[name] = value }
        }
        return rebased
    }

    /// Merges mine and theirs over base, field by field (see the table above).
    static func merge(base: JSONValue, mine: JSONValue, theirs: JSONValue) -> Outcome {
        var merged = theirs
        var conflicts: [String] = []
        for name in userFieldNames(base, mine, theirs) {
            let (was, local, server) = (base[name] ?? .null, mine[name] ?? .null, theirs[name] ?? .null)
            if local == server || local == was { continue }  // theirs already
            if server == was {
                merged[name] = local
            } else {
                conflicts.append(name)
            }
        }
        return Outcome(merged: merged, conflicts: conflicts.sorted())
    }

    /// The merge with its conflicts decided by `policy`; nil when the policy surfaces them.
    static func merge(base: JSONValue, mine: JSONValue, theirs: JSONValue, policy: FieldConflictPolicy) -> JSONValue? {
        var outcome = merge(base: base, mine: mine, theirs: theirs)
        guard !outcome.conflicts.isEmpty else { return outcome.merged }
        for name in outcome.conflicts {
            let (was, local, server) = (base[name] ?? .null, mine[name] ?? .null, theirs[name] ?? .null)
            switch policy {
            case .surface: return nil
            case .serverWins: outcome.merged[name] = server
            case .clientWins: outcome.merged[name] = local
            case .resolve(let decide): outcome.merged[name] = decide(name, was, local, server)
            }
        }
        return outcome.merged
    }

    /// The user fields' names of `rows` (neither the id nor a system property).
    private static func userFieldNames(_ rows: JSONValue...) -> Set<String> {
        var names: Set<String> = []
        for row in rows {
            guard case .object(let members) = row else { continue }
            for name in members.keys where !SystemProperty.isSystemProperty(name) { names.insert(name) }
        }
        return names
    }
}
