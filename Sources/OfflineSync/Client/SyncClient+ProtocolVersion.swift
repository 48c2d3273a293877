import SyncOData

extension SyncClient {
    /// The dialect of the table protocol a client speaks (``Configuration/protocol``). The app's code is the same
    /// in both: tables, queries, push, pull, ``OperationError`` and ``ConflictResolution`` do not change.
    public enum ProtocolVersion: String, Sendable, Hashable, CaseIterable {
        /// Azure Mobile Apps 2.0.0 (`ZUMO-API-VERSION: 2.0.0`): Azure Mobile Apps backends (Node.js, ASP.NET)
        /// and `sync-server`. Updates are `PATCH` with `If-Match`; pushes go in batches where `sync-server`
        /// offers them.
        case v2 = "2.0.0"
        /// Datasync 3.0.0 (`ZUMO-API-VERSION: 3.0.0`): Datasync Community Toolkit and
        /// `Microsoft.AspNetCore.Datasync` backends, and `sync-server`. Updates are `PUT` of the whole item with
        /// `If-Match`, pages are `{"items","count","nextLink"}`, dates in filters are `cast(…,Edm.DateTimeOffset)`,
        /// the token goes as `Authorization: Bearer`. Pulls still page by `(updatedAt, id)` rather than by the
        /// offsets of `nextLink` (which skip a row changed between two pages); every operation is its own request.
        case v3 = "3.0.0"
    }
}
