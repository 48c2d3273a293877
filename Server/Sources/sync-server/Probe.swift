import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sync-server probe`: asks a server on this host whether it is ready, for a container's health check (an image
/// `FROM scratch` has no curl). Exits 0 on a 200 answer, 1 otherwise, within `--timeout` seconds.
struct Probe: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when the server on this host answers GET /ready (or --path) with 200; else 1.",
        discussion: "The port is --port, else $SYNC_SERVER_PORT, else 8080. For a container's HEALTHCHECK."
    )

    @Option(help: "The server's port on 127.0.0.1 (default: $SYNC_SERVER_PORT, else 8080).")
    var port: Int?

    @Option(help: "The path to ask.")
    var path = "/ready"

    @Option(help: "Seconds to wait for the answer.")
    var timeout = 5

    func run() throws {
        let port = port ?? ProcessInfo.processInfo.environment["SYNC_SERVER_PORT"].flatMap(Int.init) ?? 8080
        let status = try Self.status(port: port, path: path, timeout: timeout)
        guard status == 200 else {
            FileHandle.standardError.write(Data("sync-server probe: \(path) answered \(status)\n".utf8))
            throw ExitCode.failure
        }
    }

    /// Why the probe got no answer; printed, and the probe exits 1.
    struct ProbeFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The status of `GET path` on 127.0.0.1:`port`, over one connection with send and receive timeouts.
    ///
    /// - Throws: ``ProbeFailure`` when it cannot connect, send, or read a status line in time.
    static func status(port: Int, path: String, timeout: Int) throws -> Int {
        func failure(_ what: String) -> ProbeFailure {
            ProbeFailure(description: "cannot \(what) 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw failure("open a socket to") }
        defer { close(descriptor) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            setsockopt(descriptor, SOL_SOCKET, option, &limit, socklen_t(MemoryLayout<timeval>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw failure("connect to") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(descriptor, request, request.count, 0) == request.count else { throw failure("send to") }
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        // "HTTP/1.1 200 OK": the status is the second word of the first line.
        while !head.contains(UInt8(ascii: "\n")), head.count < 4096 {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            head += buffer[0..<count]
        }
        let line = String(decoding: head.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let words = line.split(separator: " ")
        guard words.count >= 2, let status = Int(words[1]) else {
            throw ProbeFailure(description: "no HTTP answer from 127.0.0.1:\(port) within \(timeout) s")
        }
        return status
    }
}
