public import Foundation
import NIOConcurrencyHelpers
import Subprocess

#if canImport(System)
    import System
#else
    import SystemPackage
#endif

/// The executables this package builds, next to the running test binary or tool.
public enum Products {
    public static var directory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// The path of the product `name`.
    public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}

/// What a finished (or killed) command printed, and how it ended.
public struct CommandResult: Sendable {
    /// The exit status, or the number of the signal that ended it.
    public var status: Int32
    public var output: String
    public var error: String
    /// Whether `killAfter` killed it (SIGKILL) before it ended by itself.
    public var wasKilled: Bool
}

/// Runs `executable` to completion, as a person would in a shell, reading its output and error while it runs and
/// waiting without holding a thread (swift-subprocess: a pidfd watched by one epoll thread).
///
/// - Parameters:
///   - environment: Variables set over this process's own environment.
///   - killAfter: When given, SIGKILL after this long: a process killed at an arbitrary point.
///   - timeout: SIGTERM after this long, SIGKILL 5 s later.
///   - started: Called with its process id once it runs (a tool that must kill its children on a signal keeps it).
/// - Throws: `SubprocessError` when it cannot be started; cancellation kills it (SIGKILL) and throws.
public func runCommand(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], killAfter: Duration? = nil,
    timeout: Duration = .seconds(30), started: @Sendable (Int32) -> Void = { _ in }
) async throws -> CommandResult {
    let killed = NIOLockedValueBox(false)
    let result = try await Subprocess.run(
        .path(FilePath(executable)), arguments: Arguments(arguments), environment: .overriding(environment),
        input: .none, output: .sequence, error: .sequence
    ) { execution in
        started(execution.processIdentifier.value)
        return try await withThrowingTaskGroup(of: Collected.self) { group in
            group.addTask { .output(try await collect(execution.standardOutput)) }
            group.addTask { .error(try await collect(execution.standardError)) }
            group.addTask {
                do {
                    if let killAfter {
                        try await Task.sleep(for: killAfter)
                        killed.withLockedValue { $0 = true }
                        try? execution.send(signal: .kill)
                    }
                    try await Task.sleep(for: timeout - (killAfter ?? .zero))
                    try? execution.send(signal: .terminate)
                    try await Task.sleep(for: .seconds(5))
                    try? execution.send(signal: .kill)
                } catch {}  // cancelled: the process ended first
                return .timer
            }
            var output: [UInt8] = []
            var error: [UInt8] = []
            var streams = 2
            while streams > 0, let next = try await group.next() {
                switch next {
                case .output(let bytes): (output, streams) = (bytes, streams - 1)
                case .error(let bytes): (error, streams) = (bytes, streams - 1)
                case .timer: break
                }
            }
            group.cancelAll()
            return (output, error)
        }
    }
    let status = result.terminationStatus
    return CommandResult(
        status: status.code, output: String(decoding: result.closureResult.0, as: UTF8.self),
        error: String(decoding: result.closureResult.1, as: UTF8.self),
        wasKilled: killed.withLockedValue { $0 } && status == .signaled(SIGKILL))
}

/// Runs the product `name` (see ``Products``) with ``runCommand(_:_:environment:killAfter:timeout:)``.
public func runProduct(
    _ name: String, _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(30)
) async throws -> CommandResult {
    try await runCommand(Products.path(name), arguments, environment: environment, timeout: timeout)
}

private enum Collected: Sendable {
    case output([UInt8])
    case error([UInt8])
    case timer
}

/// Every byte of a stream, to its end.
func collect(_ stream: SubprocessOutputSequence) async throws -> [UInt8] {
    var bytes: [UInt8] = []
    for try await chunk in stream { chunk.withUnsafeBytes { bytes.append(contentsOf: $0) } }
    return bytes
}

extension Subprocess.Environment {
    /// This process's environment with `values` set over it.
    static func overriding(_ values: [String: String]) -> Self {
        .inherit.updating(
            Dictionary(
                uniqueKeysWithValues: values.compactMap { name, value in
                    Key(rawValue: name).map { ($0, Optional(value)) }
                }))
    }
}

extension TerminationStatus {
    /// The exit status, or the number of the signal that ended the process (as Foundation's `Process` reports it).
    var code: Int32 {
        switch self {
        case .exited(let code), .signaled(let code): code
        }
    }
}
