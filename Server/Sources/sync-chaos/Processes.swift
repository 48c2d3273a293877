import Foundation
import SyncCore
import SyncSQLite
import TestSupport

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

    static func started(_ pid: Int32) { running.withLock { _ = $0.insert(pid) } }
    static func ended(_ pid: Int32) { running.withLock { _ = $0.remove(pid) } }

    /// From now on, SIGTERM and SIGINT kill every running child (SIGKILL), then end the run (exit 128 + signal).
    static func stopOnSignals() {
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                for pid in running.withLock({ $0 }) + directChildren() { kill(pid, SIGKILL) }
                exit(128 + number)
            }
            source.resume()
            handlers.withLock { $0.append(source) }
        }
    }
}

/// Every process whose parent is this one, from /proc (Linux; none elsewhere): a child started a moment before the
/// signal, before its id was registered, is one of them.
private func directChildren() -> [Int32] {
    #if os(Linux)
        let me = getpid()
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { Int32($0) } ?? []
        return ids.filter { id in
            // /proc/ID/stat: "ID (NAME) STATE PPID …"; NAME may hold spaces, so read after its last ')'.
            guard let stat = try? String(contentsOfFile: "/proc/\(id)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == me
        }
    #else
        return []
    #endif
}

/// Runs `executable` to completion (TestSupport's `runCommand`: SIGTERM after 30 s), or kills it with SIGKILL after
/// `killAfter` milliseconds; the process is one of the run's ``Children`` while it runs.
func runChild(
    _ executable: String, _ arguments: [String], environment: [String: String], killAfter: Int? = nil
) async throws -> CommandResult {
    let pid = Locked<Int32>(0)
    defer { Children.ended(pid.withLock { $0 }) }
    return try await runCommand(
        executable, arguments, environment: environment, killAfter: killAfter.map { .milliseconds($0) },
        started: { started in
            pid.withLock { $0 = started }
            Children.started(started)
        })
}

/// A `sync-server` process on 127.0.0.1 over one SQLite file, which the run kills and restarts.
final class ChaosServer: Sendable {
    let executable: String
    let port: Int
    let database: String
    /// More command-line options (`--config`).
    let options: [String]
    /// The token ``rows(table:token:)`` sends by default, for a server that checks tokens.
    let token: String?
    private let process = Locked<ServerProcess?>(nil)

    init(executable: String, port: Int, database: String, options: [String] = [], token: String? = nil) {
        self.executable = executable
        self.port = port
        self.database = database
        self.options = options
        self.token = token
    }

    /// Starts it and waits (up to 60 s) for its `listening on` line.
    func start() async throws {
        let server = try await ServerProcess(
            port: port, database: database, options: options, product: executable, logLevel: "error")
        Children.started(server.process.processIdentifier)
        process.withLock { $0 = server }
    }

    /// SIGKILL: no chance to finish anything.
    func killAbruptly() async { await end { await $0.kill() } }

    /// SIGTERM and wait.
    func stop() async { await end { await $0.stop() } }

    /// Ends the running server (if any) with `ending`, and forgets it.
    private func end(_ ending: (ServerProcess) async -> Void) async {
        guard let server = process.withLock({ $0 }) else { return }
        let pid = server.process.processIdentifier
        await ending(server)
        Children.ended(pid)
        process.withLock { $0 = nil }
    }

    /// Starts the server again if the chaos left it down.
    func ensureRunning() async throws {
        if let probe = try? await RawConnection(port: port) {
            await probe.close()
        } else {
            try await start()
        }
    }

    /// The bytes of an attached file, straight from the server, or nil when it answers anything but 200.
    func attachment(_ hash: String, table: String = "TodoItem") async throws -> [UInt8]? {
        let response = try await get("/tables/\(table)/attachments/\(hash)", headers: "")
        return response.status == 200 ? response.body : nil
    }

    /// Every row of the table (tombstones too), straight from the server, following `Link`.
    func rows(table: String = "TodoItem", token: String? = nil) async throws -> [JSONValue] {
        let authorization = (token ?? self.token).map { "Authorization: Bearer \($0)\r\n" } ?? ""
        var path: String? = "/tables/\(table)?__includeDeleted=true&$top=1000"
        var rows: [JSONValue] = []
        while let next = path {
            let response = try await get(next, headers: authorization)
            guard response.status == 200 else { throw ChaosError("server rows: no 200 for \(next)") }
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

    /// A GET on its own connection (`Connection: close`): the status, the head and the body (nil when the reply was
    /// cut short of its `Content-Length`).
    private func get(_ path: String, headers: String) async throws -> Response {
        guard let connection = try? await RawConnection(port: port) else { throw ChaosError("server not reachable") }
        let reply = await connection.readAll(
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: 2.0.0\r\n\(headers)Connection: close\r\n\r\n")
        await connection.close()
        guard let end = reply.bytes.firstRange(of: Array("\r\n\r\n".utf8)), let status = reply.status else {
            throw ChaosError("server GET \(path): no answer")
        }
        let response = Response(
            status: status, head: String(decoding: reply.bytes[..<end.lowerBound], as: UTF8.self),
            body: Array(reply.bytes[end.upperBound...]))
        if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            guard response.body.count >= length else { throw ChaosError("server GET \(path): cut short") }
            return Response(status: status, head: response.head, body: Array(response.body.prefix(length)))
        }
        return response
    }

    private struct Response {
        let status: Int
        let head: String
        let body: [UInt8]

        func header(_ name: String) -> String? {
            let prefix = name.lowercased() + ":"
            for line in head.components(separatedBy: "\r\n").dropFirst() where line.lowercased().hasPrefix(prefix) {
                return line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
            }
            return nil
        }
    }
}

struct ChaosError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
