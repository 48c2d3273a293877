import AsyncHTTPClient
import ChildProcesses
import Foundation
import NIOCore
import NIOHTTP1
import SyncCore

#if canImport(Glibc)
    import Glibc
#endif

/// The executables this package builds, next to the test binary.
enum Products {
    static var directory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}

/// What a finished command printed.
struct CommandResult: Sendable {
    let status: Int32
    let output: String
    let error: String
}

/// Runs a product to completion (bounded by `timeout`), as a person would in a shell. Its output is read while
/// it runs, and every wait happens off Swift's cooperative threads: the suites run side by side on them (two on a
/// 2-core machine), and a test that blocked one for a minute-long chaos run starved the rest.
func runProduct(_ name: String, _ arguments: [String], environment: [String: String], timeout: TimeInterval = 30)
    async throws -> CommandResult
{
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: Products.path(name))
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    process.standardInput = FileHandle.nullDevice
    try process.run()
    async let printed = offCooperativeThreads { output.fileHandleForReading.readDataToEndOfFile() }
    async let complained = offCooperativeThreads { error.fileHandleForReading.readDataToEndOfFile() }
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning, Date() < deadline { try? await Task.sleep(for: .milliseconds(10)) }
    if process.isRunning { process.terminate() }
    await offCooperativeThreads { process.waitUntilExit() }
    return CommandResult(
        status: process.terminationStatus, output: String(decoding: await printed, as: UTF8.self),
        error: String(decoding: await complained, as: UTF8.self))
}

/// Runs blocking work (a pipe read, a wait for a process) on a Dispatch thread, not on a cooperative one.
func offCooperativeThreads<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: work()) }
    }
}

/// A development token for `subject` from `sync-server token`, signed with `secret`.
func developmentToken(_ subject: String, secret: String, ttl: Int = 600) async throws -> String {
    let result = try await runProduct(
        "sync-server", ["token", "--sub", subject, "--secret", secret, "--ttl", String(ttl)], environment: [:])
    guard result.status == 0 else { throw E2EError("sync-server token failed: \(result.error)") }
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A `sync-server` process (or another server product that takes its options) on 127.0.0.1.
final class ServerProcess {
    private let process = ChildProcess()

    /// Starts the server on `port` and waits (up to 20 s) for its `listening on` line.
    ///
    /// - Parameters:
    ///   - port: The port.
    ///   - database: `sqlite:PATH` or a `postgres://` URL.
    ///   - options: More command-line options.
    ///   - product: The server's executable.
    init(port: Int, database: String, options: [String] = [], product: String = "sync-server") throws {
        process.executableURL = URL(fileURLWithPath: Products.path(product))
        process.arguments = ["--port", String(port), "--database", database, "--log-level", "warning"] + options
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var seen = ""
        let deadline = Date().addingTimeInterval(20)
        while !seen.contains("listening on"), Date() < deadline, process.isRunning {
            seen += String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        }
        guard seen.contains("listening on http://127.0.0.1:\(port)") else {
            stop()
            throw E2EError("\(product) did not start: \(seen)")
        }
    }

    /// Stops the server with SIGTERM and waits for it.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// Sends `number` (SIGTERM, SIGINT) to the server.
    func signal(_ number: Int32) { process.signal(number) }

    /// Waits up to `limit` for the process to exit (SIGKILL after that).
    ///
    /// - Returns: Its exit status, or nil when it had to be killed.
    func exitStatus(within limit: Duration) -> Int32? {
        let started = ContinuousClock.now
        while process.isRunning, started.duration(to: .now) < limit { usleep(10_000) }
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return nil
    }

    /// Sends SIGTERM and waits up to `limit` for the process to exit; SIGKILL after that.
    ///
    /// - Returns: How long the exit took, or nil when it had to be killed.
    func terminate(within limit: Duration) -> Duration? {
        let started = ContinuousClock.now
        process.terminate()
        while process.isRunning, started.duration(to: .now) < limit { usleep(10_000) }
        guard process.isRunning else { return started.duration(to: .now) }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return nil
    }

    deinit { stop() }
}

/// JSON requests to a server process on 127.0.0.1, with `ZUMO-API-VERSION: 2.0.0`.
struct E2EHTTP {
    let port: Int

    /// Sends a request; the answer's body is nil when it is empty or not JSON.
    func send(
        _ method: HTTPMethod, _ path: String, body: JSONValue? = nil, headers: [String: String] = [:]
    ) async throws -> (status: UInt, headers: HTTPHeaders, body: JSONValue?) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        request.headers.add(name: "ZUMO-API-VERSION", value: "2.0.0")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(Array(body.serializedData()))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 24)
        return (response.status.code, response.headers, try? JSONValue(parsing: String(buffer: bytes)))
    }
}

struct E2EError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A port on 127.0.0.1 that nothing listens on right now.
func freePort() throws -> Int {
    let reservation = try PortReservation()
    reservation.release()
    return reservation.port
}

/// A port of 127.0.0.1 held by a bound socket that does not listen: a connection to it is refused at once (the
/// server is "down"), and no other server — another test's, started on port 0 — can take it meanwhile. A test that
/// leaves its server's port unused for a while reserves it, and releases it just before the server starts.
final class PortReservation {
    let port: Int
    private var socket: Int32

    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw E2EError("no socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            close(socket)
            throw E2EError("bind failed")
        }
        self.socket = socket
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Lets the port go (once).
    func release() {
        guard socket >= 0 else { return }
        close(socket)
        socket = -1
    }

    deinit { release() }
}
