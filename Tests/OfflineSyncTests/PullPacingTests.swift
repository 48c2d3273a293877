import OfflineSyncTesting
import Testing

@testable import OfflineSync

/// The pull's pacing without I/O: each rule on its own, then random event sequences checked for the invariants.
@Suite(.timeLimit(.minutes(3))) struct PullPacingTests {
    static func ms(_ value: Int) -> Duration { .milliseconds(value) }

    @Test func rememberedLimitsCapTheFirstAndLargestSizes() {
        let fresh = PullPacing(first: 1000, max: 10_000, remembered: nil, topLimit: nil, ahead: true)
        #expect((fresh.size, fresh.maxSize, fresh.accepted) == (1000, 10_000, 1000))
        let remembered = PullPacing(first: 1000, max: 10_000, remembered: 50, topLimit: 5000, ahead: true)
        #expect((remembered.size, remembered.maxSize) == (50, 50))
        let limited = PullPacing(first: 1000, max: 10_000, remembered: nil, topLimit: 2000, ahead: true)
        #expect((limited.size, limited.maxSize) == (1000, 2000))
    }

    @Test func aSmallerServerPageSizeIsFollowedAndRemembered() {
        var pacing = PullPacing(first: 1000, max: 10_000, remembered: nil, topLimit: nil, ahead: true)
        let larger = pacing.firstPage(after: Self.ms(50), serverPageSize: 2000)
        #expect(larger == nil)
        let smaller = pacing.firstPage(after: Self.ms(50), serverPageSize: 100)
        #expect(smaller == 100)
        #expect((pacing.size, pacing.maxSize, pacing.accepted) == (100, 100, 100))
        let grew = pacing.grow(afterFullPage: true, applyTime: Self.ms(1))
        #expect(!grew, "no growth past the server's size")
    }

    @Test func pagesGrowByTheRatioOfWaitingToApplyingBetweenTwoAndSixteen() {
        func grown(waited: Int, applied: Int, full: Bool = true, max: Int = 100_000) -> Int {
            var pacing = PullPacing(first: 100, max: max, remembered: nil, topLimit: nil, ahead: true)
            _ = pacing.firstPage(after: Self.ms(waited), serverPageSize: nil)
            pacing.grow(afterFullPage: full, applyTime: Self.ms(applied))
            return pacing.size
        }
        #expect(grown(waited: 50, applied: 10) == 500)  // ×5
        #expect(grown(waited: 11, applied: 10) == 200)  // at least ×2
        #expect(grown(waited: 1000, applied: 10) == 1600)  // at most ×16
        #expect(grown(waited: 1000, applied: 0) == 1600)  // an instant store: ×16
        #expect(grown(waited: 10, applied: 10) == 100, "the store sets the pace: no growth")
        #expect(grown(waited: 50, applied: 10, full: false) == 100, "a short page: no growth")
        #expect(grown(waited: 50, applied: 10, max: 300) == 300, "capped at the largest size")
    }

    @Test func twoPagesPerRoundTripOnlyAtTheLargestSizeWhileTheNetworkSetsThePace() {
        var pacing = PullPacing(first: 100, max: 100, remembered: nil, topLimit: nil, ahead: true)
        #expect(!pacing.asksAhead(isLast: false, received: 100, total: nil), "not yet seen to wait for the network")
        pacing.arrived(after: Self.ms(60), applyTime: Self.ms(5))
        #expect(pacing.asksAhead(isLast: false, received: 100, total: nil))
        #expect(pacing.asksAhead(isLast: false, received: 100, total: 201))
        #expect(!pacing.asksAhead(isLast: false, received: 100, total: 200), "the count says the next is the last")
        #expect(!pacing.asksAhead(isLast: true, received: 100, total: nil))
        pacing.stopAskingAhead()
        #expect(!pacing.asksAhead(isLast: false, received: 100, total: nil))
        var off = PullPacing(first: 100, max: 100, remembered: nil, topLimit: nil, ahead: false)
        off.arrived(after: Self.ms(60), applyTime: Self.ms(5))
        #expect(!off.asksAhead(isLast: false, received: 100, total: nil))
    }

    /// A pair of pages that arrives before the store is done with the pair before it does not end the asking ahead:
    /// it took turns with single pages, every other round trip, and a first pull on loopback waited for half its pages.
    /// Four pages in a row there before the store was ready end it; one page waited for starts it again.
    @Test func askingAheadStopsOnlyAfterSeveralPagesInARowWereThereBeforeTheStore() {
        var pacing = PullPacing(first: 100, max: 100, remembered: nil, topLimit: nil, ahead: true)
        pacing.arrived(after: Self.ms(6), applyTime: Self.ms(5))
        for early in 1..<PullPacing.storeBoundLimit {
            pacing.arrived(after: Self.ms(0), applyTime: Self.ms(10))
            #expect(pacing.asksAhead(isLast: false, received: 100, total: nil), "\(early) early")
        }
        pacing.arrived(after: Self.ms(0), applyTime: Self.ms(10))
        #expect(!pacing.asksAhead(isLast: false, received: 100, total: nil), "the store sets the pace")
        pacing.arrived(after: Self.ms(7), applyTime: Self.ms(5))
        #expect(pacing.asksAhead(isLast: false, received: 100, total: nil))
    }

    @Test func aRefusedTopFallsBackToTheLargestAcceptedSizeAndACutPageStopsGrowth() {
        var pacing = PullPacing(first: 100, max: 10_000, remembered: nil, topLimit: nil, ahead: true)
        _ = pacing.firstPage(after: Self.ms(100), serverPageSize: nil)
        pacing.grow(afterFullPage: true, applyTime: Self.ms(10))  // 1000
        pacing.answered(asked: 1000, rows: 1000, cut: false, applyTime: Self.ms(200))  // accepted 1000, no growth
        #expect((pacing.size, pacing.accepted) == (1000, 1000))
        pacing.arrived(after: Self.ms(100), applyTime: Self.ms(10))
        pacing.answered(asked: 1000, rows: 1000, cut: false, applyTime: Self.ms(10))  // grows to 10,000
        #expect(pacing.size == 10_000)
        let kept = pacing.refusedTop()
        #expect(kept == 1000)
        #expect((pacing.size, pacing.maxSize) == (1000, 1000))

        var cut = PullPacing(first: 100, max: 10_000, remembered: nil, topLimit: nil, ahead: true)
        cut.answered(asked: 100, rows: 40, cut: true, applyTime: Self.ms(1))
        #expect((cut.size, cut.maxSize) == (100, 100))
    }

    /// Random sequences of every event — a first page with or without a smaller server page size, growth after
    /// full and short pages, pages that arrive while the network or the store sets the pace, pages answered full,
    /// short or cut, refused `$top`s and failed joins — from sizes below and at their largest, with asking ahead on
    /// and off. After each event: 1 ≤ size ≤ maxSize; maxSize never grows; a size grows by 2 to 16 times (or to
    /// maxSize) and shrinks only to a server's page size or to the largest accepted one; asking ahead needs the
    /// largest size, a network-bound pull, and no failed join before. 2,000 sequences of 40 events, fixed seeds.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomEventSequencesKeepTheInvariants(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<2000 {
            let first = 1 + Int(random.next() % 200)
            var pacing = PullPacing(
                first: first, max: first * (1 + Int(random.next() % 64)),
                remembered: random.next() % 4 == 0 ? 1 + Int(random.next() % 300) : nil,
                topLimit: random.next() % 4 == 0 ? 1 + Int(random.next() % 5000) : nil, ahead: random.next() % 2 == 0)
            var failedJoin = false
            for step in 0..<40 {
                let before = pacing
                let time = { Self.ms(Int(random.next() % 100)) }
                switch random.next() % 7 {
                case 0 where step == 0:
                    _ = pacing.firstPage(
                        after: time(), serverPageSize: random.next() % 2 == 0 ? 1 + Int(random.next() % 500) : nil)
                case 0, 1: pacing.grow(afterFullPage: random.next() % 2 == 0, applyTime: time())
                case 2: pacing.arrived(after: time(), applyTime: time())
                case 3:
                    pacing.answered(
                        asked: pacing.size, rows: Int(random.next() % UInt64(pacing.size + 1)),
                        cut: random.next() % 5 == 0, applyTime: time())
                case 4: pacing.answered(asked: pacing.size, rows: pacing.size, cut: false, applyTime: time())
                case 5: _ = pacing.refusedTop()
                default:
                    pacing.stopAskingAhead()
                    failedJoin = true
                }
                if before.size <= before.maxSize {
                    #expect(pacing.size >= 1 && pacing.size <= pacing.maxSize, "seed \(seed) step \(step)")
                }
                #expect(pacing.maxSize <= before.maxSize || before.maxSize < before.size)
                if pacing.size > before.size {
                    #expect(pacing.size == pacing.maxSize || pacing.size >= before.size * 2)
                    #expect(pacing.size <= before.size * 16)
                }
                if pacing.size < before.size {
                    #expect(pacing.size == pacing.accepted || pacing.size == pacing.maxSize)
                }
                if pacing.asksAhead(isLast: false, received: 0, total: nil) {
                    #expect(pacing.size == pacing.maxSize && pacing.networkBound && !failedJoin)
                }
            }
        }
    }
}
