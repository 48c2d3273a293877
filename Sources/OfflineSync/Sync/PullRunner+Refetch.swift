import Foundation
import Logging
import SyncCore

extension PullRunner {
    /// Fetches the items of `table` marked to be fetched again and stores the server's current rows
    /// (PROTOCOL.md §5). An item with a pending operation keeps its local row (its push brings the
    /// server's), and a row the store already has in a newer version is kept.
    ///
    /// - Throws: ``SyncStop`` when the server cannot be reached; the marks stay for the next sync.
    func refetchMarked(in table: TableName) async throws {
        try await refetch(try await store.read { try $0.itemsToRefetch(in: table) }, in: table)
    }

    /// Fetches the items `ids` of `table`, marked to be fetched again, as ``refetchMarked(in:)`` does.
    func refetch(_ ids: [ItemID], in table: TableName) async throws {
        guard !ids.isEmpty else { return }
        var log = logger
        log[metadataKey: SyncLogKey.table] = "\(table)"
        for id in ids {
            let server = try await fetchServerRow(table, id, logger: log)
            try await store.write { [account] writer in
                try account.confirm(in: writer)
                try writer.removeRefetch(id, in: table)
                guard try writer.lastOperation(for: id, in: table) == nil else { return }
                guard case .row(let row) = server, !row.isDeleted else {
                    try writer.deleteItem(id, in: table)
                    return
                }
                if let local = try writer.item(id, in: table)?.updatedAt, let fetched = row.updatedAt,
                    local > fetched
                {
                    return
                }
                try writer.upsert(row, in: table)
            }
        }
    }
}
