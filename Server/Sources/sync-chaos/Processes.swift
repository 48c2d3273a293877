import ChildProcesses
import Foundation
import SyncCore
import SyncSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The processes this run started and has not seen exit, so that a SIGTERM or SIGINT to the run stops them too
/// (the server and the devices would otherwise outlive it).
enum Children {
    private static let running = Locked<Set<Int32>>([])
    private static let handlers = Locked<[any DispatchSourceSignal]>([])

    static func started(_ process: ChildProcess) { running.withLock { _ = $0.insert(process.processIdentifier) } }
    static func ended(_ process: ChildProcess) { running.withLock { _ = $0.remove(process.processIdentifier) } }

    /// From now on, SIGTERM and SIGINT kill every running child (SIGKILL), then end the run (exit 128 + signal).
    static func stopOnSignals() {
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                for pid in running.withLock({ $0 }) { kill(pid, SIGKILL) }
                exit(128 + number)
            }
            source.resume()
            handlers.withLock { $0.append(source) }
        }
    }
}

/// What a finished (or killed) command printed.
struct CommandResult {
    var status: Int32
    var output: String
    var error: String
    var wasKilled: Bool
}

/// Runs `executable` to completion, or kills it with SIGKILL after `killAfter` milliseconds, or
/// with SIGTERM after `timeout` seconds.
func runCommand(
    _ executable: String, _ arguments: [String], environment: [String: String], killAfter: Int? = nil,
    timeout: TimeInterval = 30
) throws -> CommandResult {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    process.standardInput = FileHandle.nullDevice
    try process.run()
    Children.started(process)
    defer { Children.ended(process) }
    var killed = false
    if let killAfter {
        usleep(useconds_t(killAfter * 1000))
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            killed = true
        }
    }
    // Read both pipes while waiting, so that a long output cannot block the process.
    let outputData = PipeReader(output)
    let errorData = PipeReader(error)
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning, Date() < deadline { usleep(2_000) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    return CommandResult(
        status: process.terminationStatus, output: String(decoding: outputData.data, as: UTF8.self),
        error: String(decoding: errorData.data, as: UTF8.self),
        wasKilled: killed && process.termination == .signal(SIGKILL))
}

/// Reads a pipe to its end on a thread of its own.
final class PipeReader: @unchecked Sendable {  // @unchecked: `result` is written once, before `done` is signalled.
    private var result = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        Thread { [self] in
            result = pipe.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }.start()
    }

    /// Everything read, once the writer closed the pipe.
    var data: Data {
        done.wait()
        done.signal()
        return result
    }
}

/// A `sync-server` process on 127.0.0.1 over one SQLite file, which the run kills and restarts.
final class ServerProcess {
    let executable: String
    let port: Int
    let database: String
    /// More command-line options (`--config`).
    let options: [String]
    /// The token ``rows(table:token:)`` sends by default, for a server that checks tokens.
    let token: String?
    private var process: ChildProcess?

    init(executable: String, port: Int, database: String, options: [String] = [], token: String? = nil) {
        self.executable = executable
        self.port = port
        self.database = database
        self.options = options
        self.token = token
    }

    /// Starts it and waits (up to 20 s) for its `listening on` line.
    func start() throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--port", String(port), "--database", database, "--log-level", "error"] + options
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        Children.started(process)
        var seen = ""
        let deadline = Date().addingTimeInterval(20)
        while !seen.contains("listening on"), Date() < deadline, process.isRunning {
            seen += String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        }
        guard seen.contains("listening on") else {
            process.terminate()
            process.waitUntilExit()
            Children.ended(process)
            throw ChaosError("sync-server did not start on port \(port): \(seen)")
        }
        self.process = process
    }

    /// SIGKILL: no chance to finish anything.
    func killAbruptly() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        Children.ended(process)
        self.process = nil
    }

    /// SIGTERM and wait.
    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        Children.ended(process)
        self.process = nil
    }

    /// The bytes of an attached file, straight from the server, or nil when it answers anything but 200.
    func attachment(_ hash: String, table: String = "TodoItem") throws -> [UInt8]? {
        guard let socket = Socket.connection(port: port) else { throw ChaosError("server not reachable") }
        defer { close(socket) }
        let request =
            "GET /tables/\(table)/attachments/\(hash) HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: 2.0.0\r\nConnection: close\r\n\r\n"
        guard Socket.write(socket, Array(request.utf8)), let response = Socket.readMessage(socket) else {
            throw ChaosError("server attachment \(hash): no answer")
        }
        return response.startLine.contains(" 200 ") ? response.body : nil
    }

    /// Every row of the table (tombstones too), straight from the server, following `Link`.
    func rows(table: String = "TodoItem", token: String? = nil) throws -> [JSONValue] {
        let authorization = (token ?? self.token).map { "Authorization: Bearer \($0)\r\n" } ?? ""
        var path: String? = "/tables/\(table)?__includeDeleted=true&$top=1000"
        var rows: [JSONValue] = []
        while let next = path {
            guard let socket = Socket.connection(port: port) else { throw ChaosError("server not reachable") }
            defer { close(socket) }
            let request =
                "GET \(next) HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: 2.0.0\r\n\(authorization)Connection: close\r\n\r\n"
            guard Socket.write(socket, Array(request.utf8)), let response = Socket.readMessage(socket),
                response.startLine.contains(" 200 ")
            else { throw ChaosError("server rows: no 200 for \(next)") }
            rows += try JSONValue(parsing: Data(response.body)).arrayValue ?? []
            path = response.header("Link").flatMap { link in
                link.components(separatedBy: ";").first.flatMap {
                    URL(string: $0.trimmingCharacters(in: .init(charactersIn: " <>")))
                }
                .map { url in url.path + (url.query.map { "?" + $0 } ?? "") }
            }
        }
        return rows
    }
}
