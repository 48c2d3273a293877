import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import SyncCore

/// `sync-soak`: many connections write and read rows of mixed sizes (and pages of up to nine 1 MB rows) against a
/// running sync-server for a bounded time, as clients that are not ours would (no `Accept-Encoding`, gzip, deflate), and report per size class how
/// many requests were sent, answered and left unanswered. Exits 1 when any request went unanswered or was answered
/// 5xx.
@main
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-soak",
        abstract:
            "Soak a running sync-server with rows of 100 B to 1 MB over many connections; every request must be answered."
    )

    @Option(help: "The server, e.g. http://127.0.0.1:8080.")
    var url: String

    @Option(help: "How long to send requests, in seconds (those in flight then finish).")
    var seconds = 60

    @Option(help: "How many connections (one worker each).")
    var connections = 64

    @Option(help: "The table to write; the server must serve it (a dynamic table).")
    var table = "TodoItem"

    @Option(help: "How long one request may take before it counts as unanswered, in seconds.")
    var requestTimeout: Int64 = 30

    func run() async throws {
        guard seconds > 0, seconds <= 3600, connections > 0, connections <= 1024 else {
            throw ValidationError("--seconds is 1 to 3600 and --connections 1 to 1024")
        }
        // Idle connections are dropped well before the server's idle timeout (60 s): a request sent on a connection
        // the server is closing for idleness at that moment is the keep-alive race of RFC 9112 §9.3.1, which a
        // client settles by retrying, not a request the server failed to answer.
        var pool = HTTPClient.Configuration.ConnectionPool(idleTimeout: .seconds(20))
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = connections
        let timeout = HTTPClient.Configuration.Timeout(connect: .seconds(5), read: .seconds(requestTimeout))
        let plain = HTTPClient(
            eventLoopGroupProvider: .singleton, configuration: .init(timeout: timeout, connectionPool: pool))
        let decoding = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(timeout: timeout, connectionPool: pool, decompression: .enabled(limit: .none)))
        let tally = Tally(started: .now)
        let deadline = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<connections {
                let soak = Worker(
                    number: worker, base: url, table: table, plain: plain, decoding: decoding, tally: tally,
                    requestTimeout: .seconds(requestTimeout))
                group.addTask { await soak.run(until: deadline) }
            }
        }
        try await plain.shutdown()
        try await decoding.shutdown()
        let report = tally.report()
        print(report.text(seconds: started.duration(to: .now)))
        if report.unanswered > 0 || report.serverErrors > 0 { throw ExitCode.failure }
    }
}

/// The sizes of the rows' text, one class each.
let sizeClasses = [100, 1_000, 64_000, 300_000, 1_000_000]
/// The class of the pages of up to nine rows of 1 MB (the page byte bound is 8 MiB).
let bigPage = 9_000_000

/// One connection's loop: creates rows of a random size class and reads, changes and deletes them, each request
/// in a random encoding.
struct Worker: Sendable {
    let number: Int
    let base: String
    let table: String
    let plain: HTTPClient
    let decoding: HTTPClient
    let tally: Tally
    let requestTimeout: TimeAmount

    func run(until deadline: ContinuousClock.Instant) async {
        var rows: [(id: String, size: Int)] = []
        var created = 0
        while ContinuousClock.now < deadline {
            let encoding = [nil, "gzip", "deflate"].randomElement() ?? nil
            let choice = rows.isEmpty ? 0 : Int.random(in: 0..<5)
            switch choice {
            case 0:
                let size = sizeClasses.randomElement() ?? 100
                let id = "soak-\(number)-\(created)"
                created += 1
                let row: JSONValue = ["id": .string(id), "size": .int(Int64(size)), "text": .string(text(size))]
                if await send(.POST, "/tables/\(table)", body: row, size: size, encoding: encoding) == 201 {
                    rows.append((id, size))
                }
            case 1:
                let row = rows[Int.random(in: 0..<rows.count)]
                _ = await send(.GET, "/tables/\(table)/\(row.id)", size: row.size, encoding: encoding)
            case 2 where Int.random(in: 0..<8) == 0:
                // Nine rows of 1 MB, the page byte bound's worth (8 MiB), from every worker's rows.
                _ = await send(
                    .GET, "/tables/\(table)?$filter=size%20eq%201000000&$top=9", size: bigPage, encoding: encoding)
            case 2:
                let row = rows[Int.random(in: 0..<rows.count)]
                _ = await send(
                    .GET, "/tables/\(table)?$filter=size%20eq%20\(row.size)&$top=3", size: row.size,
                    encoding: encoding)
            case 3:
                let row = rows[Int.random(in: 0..<rows.count)]
                _ = await send(
                    .PATCH, "/tables/\(table)/\(row.id)", body: ["text": .string(text(row.size, "u"))],
                    size: row.size, encoding: encoding)
            default:
                let index = Int.random(in: 0..<rows.count)
                let row = rows.remove(at: index)
                _ = await send(.DELETE, "/tables/\(table)/\(row.id)", size: row.size, encoding: encoding)
            }
        }
    }

    private func text(_ size: Int, _ letter: String = "s") -> String { String(repeating: letter, count: size) }

    /// Sends one request and counts its outcome under `size`; returns the status, or nil when unanswered.
    private func send(
        _ method: HTTPMethod, _ path: String, body: JSONValue? = nil, size: Int, encoding: String?
    ) async -> Int? {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        if let encoding { request.headers.add(name: "Accept-Encoding", value: encoding) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body.serializedData()))
        }
        tally.sent(size)
        do {
            let response = try await (encoding == nil ? plain : decoding).execute(request, timeout: requestTimeout)
            _ = try await response.body.collect(upTo: 64 << 20)
            let status = Int(response.status.code)
            tally.answered(size, status: status)
            return status
        } catch {
            tally.unanswered(size, error: error)
            return nil
        }
    }
}

/// What happened, per size class.
final class Tally: Sendable {
    struct Counts {
        var sent = 0
        var answered = 0
        var unanswered = 0
        var serverErrors = 0
    }

    struct Report {
        let counts: [Int: Counts]
        let firstError: String?

        var unanswered: Int { counts.values.map(\.unanswered).reduce(0, +) }
        var serverErrors: Int { counts.values.map(\.serverErrors).reduce(0, +) }

        func text(seconds: Duration) -> String {
            func row(_ fields: [String]) -> String {
                fields.map { $0.padding(toLength: 12, withPad: " ", startingAt: 0) }.joined()
            }
            var lines = [row(["size class", "sent", "answered", "unanswered", "5xx"])]
            for size in sizeClasses + [bigPage] {
                let count = counts[size] ?? Counts()
                lines.append(
                    row([
                        size == bigPage ? "9 MB pages" : "\(size) B", "\(count.sent)", "\(count.answered)",
                        "\(count.unanswered)",
                        "\(count.serverErrors)",
                    ]))
            }
            let total = counts.values.map(\.sent).reduce(0, +)
            lines.append("total \(total) requests in \(seconds); unanswered \(unanswered), 5xx \(serverErrors)")
            if let firstError { lines.append("first failure: \(firstError)") }
            return lines.joined(separator: "\n")
        }
    }

    let started: ContinuousClock.Instant
    init(started: ContinuousClock.Instant) { self.started = started }

    private let state = NIOLockedValueBox(([Int: Counts](), String?.none))

    func sent(_ size: Int) { state.withLockedValue { $0.0[size, default: Counts()].sent += 1 } }

    func answered(_ size: Int, status: Int) {
        state.withLockedValue {
            $0.0[size, default: Counts()].answered += 1
            if status >= 500 {
                $0.0[size, default: Counts()].serverErrors += 1
                if $0.1 == nil { $0.1 = "HTTP \(status) for a row of \(size) B" }
            }
        }
    }

    func unanswered(_ size: Int, error: any Error) {
        state.withLockedValue {
            $0.0[size, default: Counts()].unanswered += 1
            if $0.1 == nil { $0.1 = "\(error) for a row of \(size) B, \(started.duration(to: .now)) in" }
        }
    }

    func report() -> Report { state.withLockedValue { Report(counts: $0.0, firstError: $0.1) } }
}
