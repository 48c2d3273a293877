/// How large a pull's pages are, and when it asks two pages per round trip — as a value: the pull tells it what it
/// measured (how long it waited for a page, how long the store took to apply one, what the server answered) and asks
/// it what to request next. No I/O and no clock, so every sequence of events can be tested without a server.
///
/// Pages grow while the pull waits longer for a page than the store takes to apply one — then each round trip, not
/// the store, sets the pace — by the ratio of the two times (at least 2, at most 16). They stop growing at the
/// largest size allowed, at a page the server cut short (its page size), and at a `$top` the server refuses (its
/// `maxTop`: the pull goes on with the largest size it took). Once they cannot grow and the network still sets the
/// pace, the page after the next is asked at the same time, until a pair fails to join or the store sets the pace
/// (``storeBoundLimit`` pages in a row there before it was ready).
struct PullPacing: Sendable, Equatable {
    /// The size of the next page request.
    private(set) var size: Int
    /// The largest size pages may grow to.
    private(set) var maxSize: Int
    /// The largest size asked and answered (the fallback when the server refuses a larger `$top`).
    private(set) var accepted: Int
    /// How long the pull waited for the current page after applying the one before (the first page: all of it).
    private(set) var waited: Duration = .zero
    /// Whether the network sets the pace: a page took longer to arrive than the store took to apply the one before,
    /// and since then fewer than ``storeBoundLimit`` pages in a row were there before the store was ready.
    private(set) var networkBound = false
    /// Pages in a row that were there before the store was ready for them.
    private var storeBound = 0
    /// How many such pages end a network-bound stretch. One was too few: two pages asked together arrive before the
    /// store is done with the pair before them, so the pull stopped asking ahead, waited for the next page alone, and
    /// began again — every other round trip (a first pull on loopback waited for half its pages).
    static let storeBoundLimit = 4
    /// Whether the pull may still ask two pages per round trip.
    private(set) var speculating: Bool

    /// The pacing of a new pull.
    ///
    /// - Parameters:
    ///   - first: The configured first page size.
    ///   - max: The configured largest page size (at least `first`).
    ///   - remembered: The server's page size, remembered from an earlier pull of the table.
    ///   - topLimit: The largest `$top` the server took when it refused a larger one, remembered likewise.
    ///   - ahead: Whether pages may be asked ahead at all.
    init(first: Int, max: Int, remembered: Int?, topLimit: Int?, ahead: Bool) {
        size = Swift.min(first, remembered ?? first)
        maxSize = Swift.min(max, topLimit ?? max, remembered ?? max)
        accepted = size
        speculating = ahead
    }

    /// The first page arrived after `waited`; it shows the server's page size when that is below the size asked.
    ///
    /// - Returns: The page size to remember for the table's next pulls, when the server's is smaller.
    mutating func firstPage(after waited: Duration, serverPageSize: Int?) -> Int? {
        self.waited = waited
        guard let serverPageSize, serverPageSize < size else { return nil }
        (size, maxSize, accepted) = (serverPageSize, serverPageSize, serverPageSize)
        return serverPageSize
    }

    /// Grows the next pages when a full page took longer to arrive than the store took to apply one: by the ratio
    /// of the two (at least 2, at most 16), up to ``maxSize``.
    ///
    /// - Returns: Whether the size grew.
    @discardableResult
    mutating func grow(afterFullPage fullPage: Bool, applyTime: Duration) -> Bool {
        guard fullPage, waited > applyTime, size < maxSize else { return false }
        let ratio = applyTime > .zero ? waited / applyTime : 16
        size = Swift.min(maxSize, size * Int(Swift.min(16, Swift.max(2, ratio))))
        return true
    }

    /// Whether the page after the next is to be asked with it: pages as large as they may be, the network still
    /// setting the pace, and — when the count is known — more rows left than the next page holds.
    func asksAhead(isLast: Bool, received: Int, total: Int?) -> Bool {
        !isLast && networkBound && size == maxSize && speculating && total.map { $0 - received > size } != false
    }

    /// The next page arrived, `waited` after the previous one was applied in `applyTime`.
    mutating func arrived(after waited: Duration, applyTime: Duration) {
        self.waited = waited
        if waited > applyTime {
            (networkBound, storeBound) = (true, 0)
        } else {
            storeBound += 1
            if storeBound >= Self.storeBoundLimit { networkBound = false }
        }
    }

    /// Two pages asked together did not join (rows moved meanwhile, or the server ignores `$skip`): one at a time
    /// from now on.
    mutating func stopAskingAhead() { speculating = false }

    /// The server refused the `$top` of the last request and answered a smaller one.
    ///
    /// - Returns: The size to keep to, and to remember for the table's next pulls.
    mutating func refusedTop() -> Int {
        (size, maxSize) = (accepted, accepted)
        return size
    }

    /// A page of `asked` rows was answered with `rows` rows; `cut` when the server cut it to its own page size.
    /// The previous page took `applyTime` to apply.
    mutating func answered(asked: Int, rows: Int, cut: Bool, applyTime: Duration) {
        accepted = Swift.max(accepted, asked)
        if cut {
            maxSize = size  // the server's page size is smaller
        } else {
            grow(afterFullPage: rows == asked, applyTime: applyTime)
        }
    }
}
