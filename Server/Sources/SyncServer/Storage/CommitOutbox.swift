public import SyncCore
import SyncSQL

/// A write as it committed, delivered to a table's ``TableHooks/afterCommit`` hook from the store's outbox.
///
/// Delivery is at least once: a write is recorded in the outbox in its own transaction, and removed only after the
/// hook returned — so a crash, a restart or a hook that throws means it is delivered again. Tell a repeat by its
/// ``sequence`` (or by ``id`` and ``version``, unique per write of an item).
public struct CommittedWrite: Sendable, Hashable {
    /// The outbox's number for this write: unique, and increasing in the order the writes committed on SQLite (on
    /// PostgreSQL, in the order they were recorded; concurrent writes may commit in another order).
    public let sequence: Int64
    /// What the write did.
    public let kind: TableWrite.Kind
    /// The table, named as configured.
    public let table: TableName
    /// The item as the write left it, every column included: a tombstone after a soft delete, the last stored copy
    /// after a delete in a table without soft delete.
    public let item: JSONValue

    /// Creates a committed write.
    ///
    /// - Parameters:
    ///   - sequence: The outbox's number for it.
    ///   - kind: What it did.
    ///   - table: The table.
    ///   - item: The item as it left it.
    public init(sequence: Int64, kind: TableWrite.Kind, table: TableName, item: JSONValue) {
        self.sequence = sequence
        self.kind = kind
        self.table = table
        self.item = item
    }

    /// The item's id (in a table of integer ids, its number's digits).
    public var id: String? {
        switch item[SystemProperty.id.rawValue] {
        case .string(let text)?: text
        case .int(let number)?: String(number)
        default: nil
        }
    }
    /// The item's version after the write.
    public var version: Version? { item.version }
}

/// The outbox's table and statements, the same on both stores but for the sequence column's type.
enum CommitOutbox {
    /// The outbox table.
    static let table = "__sync_outbox"

    /// Its columns: the sequence, the table's canonical name, the kind, the item's JSON, and until when (milliseconds
    /// since 1970) a drainer holds the entry — 0 when none does.
    static func createSQL(sequence: String) -> String {
        """
        CREATE TABLE IF NOT EXISTS "\(table)" (
            "sequence" \(sequence),
            "table" TEXT NOT NULL,
            "kind" TEXT NOT NULL,
            "item" TEXT NOT NULL,
            "leasedUntil" BIGINT NOT NULL DEFAULT 0
        )
        """
    }

    /// The values of the entry that records `item`'s write.
    static func entry(_ kind: TableWrite.Kind, _ item: JSONValue, schema: TableSchema) -> [SQLValue] {
        [.text(schema.name.canonical), .text(kind.rawValue), .text(item.serialized())]
    }

    /// The committed write an outbox row holds, or nil for one this server cannot read (a kind it does not know).
    static func write(sequence: Int64, table: String, kind: String, item: String) -> CommittedWrite? {
        guard let kind = TableWrite.Kind(rawValue: kind), let table = try? TableName(table),
            let item = try? JSONValue(parsing: item)
        else { return nil }
        return CommittedWrite(sequence: sequence, kind: kind, table: table, item: item)
    }
}
