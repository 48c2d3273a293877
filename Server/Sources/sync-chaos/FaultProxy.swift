import Foundation
import OfflineSyncTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An HTTP proxy on 127.0.0.1 between the devices and `sync-server` that injects faults: each
/// request is, at random (seeded), passed, dropped before the server sees it, answered 503 without
/// reaching the server, forwarded with its reply lost (the server committed), or forwarded with its
/// reply cut short. While partitioned it closes every connection at once. One request per
/// connection; a thread per connection.
final class FaultProxy: @unchecked Sendable {  // @unchecked: mutable state behind `lock`.
    enum Fault: String, CaseIterable {
        case dropRequest = "request dropped"
        case serviceUnavailable = "503 answered"
        case loseReply = "reply lost after commit"
        case cutReply = "reply cut short"
        case partitioned = "refused while partitioned"
    }

    let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    private let lock = NSLock()
    private var random: SplitMix64
    private var faultRate: Double
    private var isPartitioned = false
    private var counts: [Fault: Int] = [:]
    private var passed = 0
    private var pagesAhead = 0
    /// How long each request waits before it is forwarded, as a link's round trip would.
    private let latency: useconds_t

    /// Starts listening; `faultRate` is the chance that a request meets one of the four faults, `latencyMilliseconds`
    /// the wait of each request that is forwarded.
    init(upstreamPort: Int, seed: UInt64, faultRate: Double, latencyMilliseconds: Int = 0) throws {
        (listener, port) = try Socket.listener()
        self.upstreamPort = upstreamPort
        latency = useconds_t(max(0, latencyMilliseconds) * 1000)
        random = SplitMix64(seed: seed)
        self.faultRate = faultRate
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Stops accepting (connections in progress finish).
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Starts or ends a network partition.
    func setPartitioned(_ value: Bool) { lock.withLock { isPartitioned = value } }

    /// Heals: no more faults or partition.
    func heal() {
        lock.withLock {
            isPartitioned = false
            faultRate = 0
        }
    }

    /// Faults injected so far, by kind, requests passed, and page requests that asked ahead (`$skip`: a pull
    /// asking the page after the next one in the same round trip).
    var tally: (faults: [Fault: Int], passed: Int, pagesAhead: Int) {
        lock.withLock { (counts, passed, pagesAhead) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            Socket.setTimeout(client, seconds: 20)
            Thread { [self] in
                handle(client)
                close(client)
            }.start()
        }
    }

    private func decide() -> Fault? {
        lock.withLock {
            let fault: Fault?
            if isPartitioned {
                fault = .partitioned
            } else if random.nextDouble() < faultRate {
                fault = [.dropRequest, .serviceUnavailable, .loseReply, .cutReply][Int(random.next() % 4)]
            } else {
                fault = nil
            }
            if let fault { counts[fault, default: 0] += 1 } else { passed += 1 }
            return fault
        }
    }

    private func handle(_ client: Int32) {
        guard let request = Socket.readMessage(client, isRequest: true) else { return }
        if request.headText.prefix(while: { $0 != "\r" }).contains("$skip=") { lock.withLock { pagesAhead += 1 } }
        let fault = decide()
        switch fault {
        case .partitioned?, .dropRequest?:
            return
        case .serviceUnavailable?:
            let body = Array(#"{"error":"Service unavailable (injected by sync-chaos)."}"#.utf8)
            let head =
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            Socket.write(client, Array(head.utf8) + body)
            return
        case .loseReply?, .cutReply?, nil:
            break
        }
        if latency > 0 { usleep(latency) }
        guard let upstream = Socket.connection(port: upstreamPort) else { return }  // the server is down
        defer { close(upstream) }
        guard Socket.write(upstream, request.closingConnection().bytes),
            let response = Socket.readMessage(upstream, bodyless: request.startLine.hasPrefix("HEAD "))
        else { return }
        switch fault {
        case .loseReply?:
            return
        case .cutReply?:
            Socket.write(client, response.head + response.body.prefix(response.body.count / 2))
        default:
            Socket.write(client, response.closingConnection().bytes)
        }
    }
}
