import Foundation
import Logging
import SyncCore
import SyncOData

/// The steps of ``PullRunner/pullPages(_:filter:queryID:start:sizes:ahead:_:_:staged:followsScope:)``: the first
/// page with the scope's listings, the first page's apply, the page the pull goes on with, and the next page's size.
extension PullRunner {
    /// What the steps of one ``pullPages(_:filter:queryID:start:sizes:ahead:_:_:staged:followsScope:)`` share.
    struct PagedPull {
        let table: TableName
        let filter: ODataExpression?
        let queryID: QueryID?
        let followsScope: Bool
        var log: Logger
        var pacing: PullPacing
        /// The scope token every page after the first must carry (nil: not compared).
        var tokenInForce: String?
        /// The horizon the query's rows were reconciled with: a later page with a newer one is not used
        /// (``HorizonMovedDuringPull``).
        var horizonInForce: WireDate?

        init(
            table: TableName, filter: ODataExpression?, queryID: QueryID?, followsScope: Bool, logger: Logger,
            pacing: PullPacing
        ) {
            (self.table, self.filter, self.queryID, self.followsScope, self.pacing) =
                (table, filter, queryID, followsScope, pacing)
            log = logger
            log[metadataKey: SyncLogKey.table] = "\(table)"
        }
    }

    /// The pull's first page, after the scope's changes are settled: while the user's scope changed, or rows moved out
    /// of it, the rows the device keeps are checked against the server's, and (for a scope) every query of the table
    /// starts over, so that a group just joined comes whole. The first page is asked again, after the listing: one
    /// read before it could hold a row that left the scope between the two, and the store now keeps the listing's
    /// token. That page's own token is checked in turn: a scope that changed again between the listing and the page
    /// (a user removed and added back) gave a page narrower than the token kept, and its rows behind the cursor were
    /// never asked for again. After three listings (the scope keeps changing) no token is kept, so that the next pull
    /// looks again. Then the token every later page must carry, and the server's page size when the first page showed
    /// it (`elapsed`: the time since the pull began).
    func firstPage(
        _ pull: inout PagedPull, cursor start: PullCursor?, listingSize: Int, since elapsed: () -> Duration,
        _ summary: inout PullSummary, staged: inout StagedTable?
    ) async throws -> Page {
        var cursor = start
        var page = try await fetch(
            pull.table, filter: pull.filter, after: cursor, pageSize: pull.pacing.size, count: true)
        var listings = 0
        while case let change = try await scopeChange(
            pull.table, token: page.scopeToken, pulledBefore: cursor != nil, staged: staged?.scope),
            change != .none
        {
            listings += 1
            let (removed, requests, restarted) = try await reconcileScope(
                pull.table, change, pageSize: listingSize, pull.log, staged: &staged,
                keepsToken: pull.followsScope && listings < 3)
            summary.removedCount += removed
            summary.requestCount += requests + 1
            if restarted {
                cursor = nil
                staged?.cursor = nil
            }
            page = try await fetch(
                pull.table, filter: pull.filter, after: cursor, pageSize: pull.pacing.size, count: true)
            if listings == 3 || !pull.followsScope { break }
        }
        // Tombstones removed since the cursor: the rows the server no longer has go, then the first page is asked again
        // (one read before the listing could hold a row whose delete, and tombstone, went before the listing).
        var reconciled = try await reconciledHorizon(pull, staged: staged?.horizon)
        var horizonListings = 0
        while horizonListings < 2, isBehind(page, reconciled: reconciled), let horizon = page.horizon {
            horizonListings += 1
            let (removed, requests) = try await reconcileHorizon(
                pull, horizon: horizon, pageSize: pull.pacing.maxSize, staged: &staged)
            if requests > 0 { summary.reconciliations += 1 }
            summary.reconciledCount += removed
            summary.requestCount += requests + 1
            reconciled = horizon
            page = try await fetch(
                pull.table, filter: pull.filter, after: cursor, pageSize: pull.pacing.size, count: true)
        }
        // Never applied past a horizon it did not reconcile with: its cursor would pass the server's telling.
        if isBehind(page, reconciled: reconciled) { throw HorizonMovedDuringPull() }
        pull.horizonInForce = reconciled
        // Every later page must carry the same token: one read under another scope (a user removed and added back
        // between two pages) lacks rows its cursor then passes for good. It is not used (``ScopeMovedDuringPull``).
        pull.tokenInForce = pull.followsScope ? page.scopeToken : nil
        if let followed = pull.pacing.firstPage(after: elapsed(), serverPageSize: page.serverPageSize) {
            pull.log.info("Pull follows the server's page size", metadata: [SyncLogKey.pageSize: "\(followed)"])
            try await store.write { [table = pull.table] in
                try $0.setSetting(String(followed), for: Self.pageSizeKey(table))
            }
        }
        return page
    }

    /// Applies the first page before the next is asked, and grows the pages by the time it took.
    func placeFirst(
        _ items: [(value: JSONValue, text: String)], _ pull: inout PagedPull, cursor: PullCursor,
        _ staged: inout StagedTable?
    ) async throws -> (count: Int, skipped: Int, time: Duration) {
        let first = try await place(items, to: pull.table, cursor: cursor, queryID: pull.queryID, staged: &staged)
        if pull.pacing.grow(afterFullPage: items.count == pull.pacing.size, applyTime: first.time) {
            pull.log.debug("Pull pages grow", metadata: [SyncLogKey.pageSize: "\(pull.pacing.size)"])
        }
        return first
    }

    /// The page the pull goes on with: the next one (its token checked), joined with the one asked ahead (`second`)
    /// when the two are contiguous — else the pull stops asking ahead (the server moved rows meanwhile, or does not
    /// take `$skip`).
    func arrived(
        _ following: Page, _ second: Page??, _ pull: inout PagedPull, asked: Int, waited: Duration,
        applyTime: Duration, _ summary: inout PullSummary
    ) throws -> Page {
        if pull.followsScope, following.scopeToken != pull.tokenInForce { throw ScopeMovedDuringPull() }
        if isBehind(following, reconciled: pull.horizonInForce) { throw HorizonMovedDuringPull() }
        pull.pacing.arrived(after: waited, applyTime: applyTime)
        summary.requestCount += 1
        guard let second else { return following }
        summary.requestCount += 1
        if pull.followsScope, let second, second.scopeToken != pull.tokenInForce { throw ScopeMovedDuringPull() }
        if let second, isBehind(second, reconciled: pull.horizonInForce) { throw HorizonMovedDuringPull() }
        if let second, let joined = try Self.join(following, second, size: asked) { return joined }
        pull.pacing.stopAskingAhead()
        pull.log.debug("Pull stops asking ahead")
        return following
    }

    /// Sizes the next page by this one: below the server's `maxTop` when it refused the size asked (remembered for the
    /// table's next pulls), else by what it answered.
    func paced(by page: Page, _ pull: inout PagedPull, asked: Int, applyTime: Duration) async throws {
        if page.refusedTop != nil {
            let kept = pull.pacing.refusedTop()
            pull.log.info("Pull keeps below the server's maxTop", metadata: [SyncLogKey.pageSize: "\(kept)"])
            try await store.write { [table = pull.table] in
                try $0.setSetting(String(kept), for: Self.topLimitKey(table))
            }
            return
        }
        let before = pull.pacing.size
        pull.pacing.answered(
            asked: asked, rows: page.items.count, cut: page.serverPageSize != nil, applyTime: applyTime)
        if pull.pacing.size != before {
            pull.log.debug("Pull pages grow", metadata: [SyncLogKey.pageSize: "\(pull.pacing.size)"])
        }
    }
}
