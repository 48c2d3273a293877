import OfflineSyncTesting
import Testing

@testable import OfflineSync

/// The automatic sync's schedule without I/O or clock: each rule, then random event sequences against a model.
@Suite(.timeLimit(.minutes(3))) struct AutoSyncScheduleTests {
    static var options: AutoSyncOptions {
        var options = AutoSyncOptions()
        options.reachability = nil
        options.pushDelay = .milliseconds(100)
        options.initialBackoff = .seconds(1)
        options.maximumBackoff = .seconds(8)
        return options
    }

    @Test func aLocalChangeSettlesThenPushesAndOtherTriggersPushAndPull() {
        var schedule = AutoSyncSchedule(Self.options)
        #expect(
            schedule.received(.localChange, offline: false, networkBackCount: 0)
                == .sync(pulls: false, settle: .milliseconds(100)))
        for trigger in [AutoSyncSchedule.Trigger.schedule, .now, .serverChange, .resume, .networkBack] {
            #expect(schedule.received(trigger, offline: false, networkBackCount: 0) == .sync(pulls: true, settle: nil))
        }
        #expect(schedule.received(.now, offline: true, networkBackCount: 0) == .idle, "offline")
    }

    @Test func anUnavailableServerBacksOffUntilASuccessOrTheNetworkComesBack() {
        var schedule = AutoSyncSchedule(Self.options)
        let waits = (0..<5).map { _ in schedule.synced(.unavailable, offline: false) }
        #expect(waits == [1, 2, 4, 8, 8].map { .retry(after: .seconds($0)) })
        schedule.waited(networkCameBack: true)
        #expect(schedule.synced(.unavailable, offline: false) == .retry(after: .seconds(1)))
        #expect(schedule.synced(.unavailable, offline: false) == .retry(after: .seconds(2)))
        #expect(schedule.synced(.done, offline: false) == .idle)
        #expect(schedule.synced(.unavailable, offline: false) == .retry(after: .seconds(1)))
        #expect(schedule.synced(.unavailable, offline: true) == .idle, "offline: the network's return asks again")
    }

    @Test func aRefusedTokenOrAnotherAccountStopsEverythingUntilResumed() {
        for outcome in [AutoSyncSchedule.Outcome.unauthorized, .otherAccount] {
            var schedule = AutoSyncSchedule(Self.options)
            #expect(schedule.synced(outcome, offline: false) == .idle)
            #expect(schedule.stopped)
            #expect(schedule.received(.now, offline: false, networkBackCount: 0) == .idle)
            #expect(!schedule.maySync(offline: false), "a settled local change is not pushed either")
            #expect(schedule.received(.resume, offline: false, networkBackCount: 0) == .sync(pulls: true, settle: nil))
            #expect(!schedule.stopped)
        }
    }

    @Test func theNetworksReturnThatARetryAlreadyServedSyncsNothingMore() {
        var schedule = AutoSyncSchedule(Self.options)
        schedule.syncStarts(networkBackCount: 3)  // the retry woken by the third return
        #expect(schedule.received(.networkBack, offline: false, networkBackCount: 3) == .idle)
        #expect(schedule.received(.networkBack, offline: false, networkBackCount: 4) == .sync(pulls: true, settle: nil))
    }

    /// Random sequences of every event — each trigger, online and offline, syncs ending in every way, waits that
    /// the network's return ended or not — checked against a model of the rules: stopped after a 401 or another
    /// account until resumed; no sync while offline or stopped; retries wait 1, 2, 4, 8, 8 … s, starting over
    /// after a success or the network's return. 3 seeds × 500 sequences of 30 events.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomEventsFollowTheModel(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let triggers: [AutoSyncSchedule.Trigger] = [
            .localChange, .schedule, .now, .resume, .serverChange, .networkBack,
        ]
        let outcomes: [AutoSyncSchedule.Outcome] = [.done, .unavailable, .unauthorized, .otherAccount]
        for _ in 0..<500 {
            var schedule = AutoSyncSchedule(Self.options)
            var (stopped, failures, networkBack, lastSaw) = (false, 0, UInt64(0), UInt64?.none)
            for _ in 0..<30 {
                let offline = random.next() % 5 == 0
                if random.next() % 2 == 0 {
                    let trigger = triggers[Int(random.next() % UInt64(triggers.count))]
                    if trigger == .networkBack, random.next() % 2 == 0 { networkBack += 1 }
                    let action = schedule.received(trigger, offline: offline, networkBackCount: networkBack)
                    if trigger == .resume { stopped = false }
                    let served = trigger == .networkBack && lastSaw == networkBack
                    if trigger == .networkBack, !served { failures = 0 }
                    let expected: AutoSyncSchedule.Action =
                        served
                        ? .idle
                        : trigger == .localChange
                            ? .sync(pulls: false, settle: .milliseconds(100))
                            : stopped || offline ? .idle : .sync(pulls: true, settle: nil)
                    #expect(action == expected)
                    #expect(schedule.maySync(offline: offline) == (!stopped && !offline))
                } else {
                    schedule.syncStarts(networkBackCount: networkBack)
                    lastSaw = networkBack
                    let outcome = outcomes[Int(random.next() % UInt64(outcomes.count))]
                    let action = schedule.synced(outcome, offline: offline)
                    switch outcome {
                    case .done:
                        failures = 0
                        #expect(action == .idle)
                    case .unauthorized, .otherAccount:
                        stopped = true
                        #expect(action == .idle)
                    case .unavailable where offline:
                        #expect(action == .idle)
                    case .unavailable:
                        failures += 1
                        #expect(action == .retry(after: .seconds(min(1 << (failures - 1), 8))))
                        let cameBack = random.next() % 3 == 0
                        schedule.waited(networkCameBack: cameBack)
                        if cameBack { failures = 0 }
                    }
                }
                #expect(schedule.stopped == stopped)
            }
        }
    }
}
