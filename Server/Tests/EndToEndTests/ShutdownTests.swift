import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
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
            let server = try ServerProcess(
                port: port, database: "sqlite:" + directory.appendingPathComponent("s.sqlite").path,
                options: ["--shutdown-timeout", "\(shutdownTimeout)"])
            defer { server.stop() }
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

        static let head = "Host: localhost\r\nZUMO-API-VERSION: 2.0.0\r\nContent-Type: application/json\r\n"

        @Test(.timeLimit(.minutes(2))) func sigtermFinishesWhatItCanClosesTheRestAndExitsZero() async throws {
            try await withServer(shutdownTimeout: 2) { server, port, page in
                // A long poll on /changes, with a token of this instance; sent first, so that the server has read it
                // while the other connections below make their round trips.
                let first = try Connection(port: port)
                first.send("GET /changes?tables=TodoItem&wait=0 HTTP/1.1\r\n\(Self.head)Connection: close\r\n\r\n")
                let token = try #require(
                    String(decoding: first.receiveAll(), as: UTF8.self).components(separatedBy: "\"token\":\"").last?
                        .split(separator: "\"").first)
                let poll = try Connection(port: port)
                poll.send("GET /changes?tables=TodoItem&wait=60&since=\(token) HTTP/1.1\r\n\(Self.head)\r\n")
                // A request whose body stops half way, and one that will be finished after the signal.
                let hung = try Connection(port: port)
                hung.send("POST /tables/TodoItem HTTP/1.1\r\n\(Self.head)Content-Length: 100\r\n\r\n{\"id\":")
                let finishing = try Connection(port: port)
                let row = #"{"id":"late","text":"sent after SIGTERM"}"#
                finishing.send(
                    "POST /tables/TodoItem HTTP/1.1\r\n\(Self.head)Content-Length: \(row.utf8.count)\r\n\r\n")
                // A client that reads its 9 MB page 1 KB at a time, and has read the first kilobyte.
                let slow = try Connection(port: port, receiveBuffer: 4096)
                slow.send("GET \(page) HTTP/1.1\r\n\(Self.head)\r\n")
                #expect(slow.receive(upTo: 1024).hasPrefix("HTTP/1.1 200"))
                // A client with a small window that reads as fast as it can: its page is in flight at the signal.
                let steady = try Connection(port: port, receiveBuffer: 4096)
                steady.send("GET \(page) HTTP/1.1\r\n\(Self.head)\r\n")
                #expect(steady.receive(upTo: 1024).hasPrefix("HTTP/1.1 200"))
                let started = ContinuousClock.now
                server.signal(SIGTERM)
                async let steadyBytes = offCooperativeThreads { steady.receiveAll().count }
                // The listener closes first; then the body is finished, and the request is answered.
                while (try? Connection(port: port)) != nil, started.duration(to: .now) < .seconds(10) {
                    usleep(20_000)
                }
                finishing.send(row)
                let answer = finishing.receive(upTo: 4096)
                #expect(answer.hasPrefix("HTTP/1.1 201"), "\(answer.prefix(200))")
                let polled = poll.receive(upTo: 4096)
                #expect(polled.hasPrefix("HTTP/1.1 200"), "\(polled.prefix(200))")

                let status = server.exitStatus(within: .seconds(30))
                let seconds = started.duration(to: .now)
                print("ShutdownTests: exit status \(status.map(String.init) ?? "none (killed)") after \(seconds)")
                #expect(status == 0)
                // The page in flight arrived whole (1 KB before the signal, the rest after it); the slow reader and
                // the hung request were cut off at the deadline.
                #expect(await steadyBytes + 1024 > 9_000_000)
                #expect(slow.receiveAll().count < 9_000_000)
                #expect(!String(decoding: hung.receiveAll(), as: UTF8.self).hasPrefix("HTTP/1.1 201"))
            }
        }

        @Test(.timeLimit(.minutes(2))) func aSecondSigtermExitsAtOnce() async throws {
            try await withServer(shutdownTimeout: 60) { server, port, page in
                let slow = try Connection(port: port, receiveBuffer: 4096)
                slow.send("GET \(page) HTTP/1.1\r\n\(Self.head)\r\n")
                #expect(slow.receive(upTo: 1024).hasPrefix("HTTP/1.1 200"))
                let started = ContinuousClock.now
                server.signal(SIGTERM)
                while (try? Connection(port: port)) != nil, started.duration(to: .now) < .seconds(10) {
                    usleep(20_000)
                }
                server.signal(SIGTERM)
                let status = server.exitStatus(within: .seconds(30))
                print(
                    "ShutdownTests: second SIGTERM, exit status \(status.map(String.init) ?? "none") after \(started.duration(to: .now))"
                )
                // 143 (128 + SIGTERM): it did not wait out its 60 s.
                #expect(status == 143)
            }
        }
    }
}

/// One blocking TCP connection to 127.0.0.1 for requests no HTTP client sends (a body that stops, a reader that
/// does not read); every read gives up after 20 s.
final class Connection: @unchecked Sendable {  // @unchecked: one thread uses it at a time
    let socket: Int32

    init(port: Int, receiveBuffer: Int32? = nil) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(socket)
            throw E2EError("cannot connect to port \(port)")
        }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(socket) }

    func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads once, at most `count` bytes.
    func receive(upTo count: Int) -> String {
        var buffer = [UInt8](repeating: 0, count: count)
        let read = recv(socket, &buffer, count, 0)
        return read > 0 ? String(decoding: buffer[..<read], as: UTF8.self) : ""
    }

    /// Reads until the other side ends the connection (or a read times out).
    func receiveAll() -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let read = recv(socket, &buffer, buffer.count, 0)
            if read <= 0 { return bytes }
            bytes += buffer[..<read]
        }
    }
}
