/// The response headers of a table's pages that tell a client more than the rows: [ours], ignored by other clients.
extension TableConfiguration {
    /// The name of the response header of a scoped table's page that carries the caller's scope token.
    public static let scopeHeader = "X-Sync-Scope"
    /// The name of the response header of a page whose pull cannot be answered by changes alone: tombstones newer than
    /// its cursor (or, without one, any) were removed (``tombstoneRetention``). It carries the table's horizon — the
    /// newest `updatedAt` among the removed tombstones — as a wire date; a client that reads it lists the ids the
    /// server holds to drop what was deleted meanwhile (docs/retention.md). Old clients ignore it.
    public static let horizonHeader = "X-Sync-Horizon"
    /// The name of the response header of the last page of a pull of a table with a ``tombstoneRetention``: a stamp
    /// every later write passes (``QueryPage/watermark``), as a wire date. A client that read every page of its pull
    /// may move its cursor there, so that a query that sees no change stays ahead of the horizon.
    public static let watermarkHeader = "X-Sync-Watermark"
    /// The name of the request header of an insert a client sends again after it read no reply to an earlier send: a
    /// stamp of the table (a wire date) no later than that first send. When the table has no trace of the item but its
    /// id is among the removed tombstones' it remembers, or ids of tombstones stamped after the floor were forgotten,
    /// the first send may have landed and the item been deleted since: the insert is refused with 410 rather than bring
    /// a deleted item back (``TableStore/removedTrace(of:in:since:)``, docs/retention.md). Old servers ignore it.
    public static let resendFloorHeader = "X-Sync-Resend-Floor"
}
