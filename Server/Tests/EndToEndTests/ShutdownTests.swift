import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A bounded stop of a real `sync-server` process (issue 28, point 2). On SIGTERM it stops accepting, lets requests
/// in flight finish for up to `--shutdown-timeout` seconds, answers a waiting `/changes` long poll at once, then
/// closes what is left and exits 0; a second SIGTERM exits at once. Before, one connection left hanging (a response
/// its client stopped reading) kept the process up until SIGKILL.
///
/// Covers: a request whose body stops half way (hung), a client that reads a 9 MB page 1 KB at a time, a long poll,
/// a request whose body is finished after the signal and a 9 MB page still being sent at the signal (both are
/// answered in full: Hummingbird's close after the last write used to drop what NIO had not yet sent).
extension ProcessTests {
    @Suite struct ShutdownTests {
        /// A server with nine rows of 1 MB, and the path of a page of all of them (9 MB).
        func withServer(shutdownTimeout: Int, _ body: (ServerProcess, Int, String) async throws -> Void) async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stop-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let port = try freePort()
            try await withServerProcess(
                port: port, database: "sqlite:" + directory.appendingPathComponent("s.sqlite").path,
                options: ["--shutdown-timeout", "\(shutdownTimeout)"]
            ) { server in
                let http = HTTPClient(eventLoopGroupProvider: .singleton)
                do {
                    for index in 0..<9 {
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/tables/TodoItem")
                        request.method = .POST
                        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
                        request.headers.add(name: "Content-Type", value: "application/json")
                        let row = #"{"id":"big-\#(index)","text":"\#(String(repeating: "b", count: 1_000_000))"}"#
                        request.body = .bytes(ByteBuffer(string: row))
                        let response = try await http.execute(request, timeout: .seconds(30))
                        #expect(response.status == .created)
                    }
                    try await http.shutdown()
                } catch {
                    try? await http.shutdown()
                    throw error
                }
                try await body(server, port, "/tables/TodoItem?$filter=startswith(id,'big-')&$top=9")
            }
        }

        /// Waits (up to 10 s after `started`) until a connection to `port` is refused: the listener has closed.
        static func waitForTheListenerToClose(port: Int, since started: ContinuousClock.Instant) async throws {
            while started.duration(to: .now) < .seconds(10), let probe = try? await RawConnection(port: port) {
                await probe.close()
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        static let head = "Host: localhost\r\nZUMO-API-VERSION: 2.0.0\r\nContent-Type: application/json\r\n"

        @Test(.timeLimit(.minutes(2))) func sigtermFinishesWhatItCanClosesTheRestAndExitsZero() async throws {
            try await withServer(shutdownTimeout: 2) { server, port, page in
                // A long poll on /changes, with a token of this instance; sent first, so that the server has read it
                // while the other connections below make their round trips.
                let first = try await RawConnection(port: port)
                await first.send(
                    "GET /changes?tables=TodoItem&wait=0 HTTP/1.1\r\n\(Self.head)Connection: close\r\n\r\n")
                let token = try #require(
                    String(decoding: await first.receiveAll().bytes, as: UTF8.self).components(
                        separatedBy: "\"token\":\""
                    ).last?
                    .split(separator: "\"").first)
                let poll = try await RawConnection(port: port)
                await poll.send("GET /changes?tables=TodoItem&wait=60&since=\(token) HTTP/1.1\r\n\(Self.head)\r\n")
                // A request whose body stops half way, and one that will be finished after the signal.
                let hung = try await RawConnection(port: port)
                await hung.send("POST /tables/TodoItem HTTP/1.1\r\n\(Self.head)Content-Length: 100\r\n\r\n{\"id\":")
                let finishing = try await RawConnection(port: port)
                let row = #"{"id":"late","text":"sent after SIGTERM"}"#
                await finishing.send(
                    "POST /tables/TodoItem HTTP/1.1\r\n\(Self.head)Content-Length: \(row.utf8.count)\r\n\r\n")
                // A client that reads its 9 MB page 1 KB at a time, and has read the first kilobyte.
                let slow = try await RawConnection(port: port, receiveBuffer: 4096)
                await slow.send("GET \(page) HTTP/1.1\r\n\(Self.head)\r\n")
                #expect(await slow.receive(upTo: 1024).starts(with: Array("HTTP/1.1 200".utf8)))
                // A client with a small window that reads as fast as it can: its page is in flight at the signal.
                let steady = try await RawConnection(port: port, receiveBuffer: 4096)
                await steady.send("GET \(page) HTTP/1.1\r\n\(Self.head)\r\n")
                #expect(await steady.receive(upTo: 1024).starts(with: Array("HTTP/1.1 200".utf8)))
                let started = ContinuousClock.now
                server.signal(SIGTERM)
                steady.startReceivingAll()  // at once, whatever the pool is doing
                async let steadyBytes = steady.receiveAll().bytes.count
                // The listener closes first; then the body is finished, and the request is answered.
                try await Self.waitForTheListenerToClose(port: port, since: started)
                await finishing.send(row)
                let answer = String(decoding: await finishing.receive(upTo: 4096), as: UTF8.self)
                #expect(answer.hasPrefix("HTTP/1.1 201"), "\(answer.prefix(200))")
                let polled = String(decoding: await poll.receive(upTo: 4096), as: UTF8.self)
                #expect(polled.hasPrefix("HTTP/1.1 200"), "\(polled.prefix(200))")

                let status = await server.exitStatus(within: .seconds(30))
                let seconds = started.duration(to: .now)
                print("ShutdownTests: exit status \(status.map(String.init) ?? "none (killed)") after \(seconds)")
                #expect(status == 0)
                // The page in flight arrived whole (1 KB before the signal, the rest after it); the slow reader and
                // the hung request were cut off at the deadline.
                #expect(await steadyBytes + 1024 > 9_000_000)
                #expect(await slow.receiveAll().bytes.count < 9_000_000)
                #expect(!String(decoding: await hung.receiveAll().bytes, as: UTF8.self).hasPrefix("HTTP/1.1 201"))
            }
        }

        @Test(.timeLimit(.minutes(2))) func aSecondSigtermExitsAtOnce() async throws {
            try await withServer(shutdownTimeout: 60) { server, port, page in
                let slow = try await RawConnection(port: port, receiveBuffer: 4096)
                await slow.send("GET \(page) HTTP/1.1\r\n\(Self.head)\r\n")
                #expect(await slow.receive(upTo: 1024).starts(with: Array("HTTP/1.1 200".utf8)))
                let started = ContinuousClock.now
                server.signal(SIGTERM)
                try await Self.waitForTheListenerToClose(port: port, since: started)
                server.signal(SIGTERM)
                let status = await server.exitStatus(within: .seconds(30))
                print(
                    "ShutdownTests: second SIGTERM, exit status \(status.map(String.init) ?? "none") after \(started.duration(to: .now))"
                )
                // 143 (128 + SIGTERM): it did not wait out its 60 s.
                #expect(status == 143)
            }
        }
    }
}
