import Foundation
import NIOConcurrencyHelpers
import Subprocess

#if canImport(System)
    import System
#else
    import SystemPackage
#endif

/// A long-lived child process — a server, PostgreSQL — that a test or tool starts, reads, signals and stops. Every
/// wait suspends (the process is watched through swift-subprocess, a pidfd on one epoll thread); none holds a thread.
/// What it prints (standard output and error together) is kept.
///
/// A handle dropped while its process runs kills it (SIGKILL), so nothing outlives the test that started it.
public final class RunningProcess: Sendable {
    private struct State {
        var execution: Execution<NoInput, SequenceOutput, CombinedErrorOutput>?
        var printed: [UInt8] = []
        var termination: TerminationStatus?
        /// The initializer, waiting for the process to run (or fail to start).
        var starting: CheckedContinuation<Void, Never>?

        /// Hands back the waiting initializer, once the process runs or has ended.
        mutating func started() -> CheckedContinuation<Void, Never>? {
            defer { starting = nil }
            return starting
        }
    }

    private let state = NIOLockedValueBox(State())
    private let runner: Task<Void, Never>

    /// Starts `executable` (a path) with `arguments`, and returns once it runs (or could not be started: then it
    /// counts as ended, with status 127).
    ///
    /// - Parameter environment: Variables set over this process's own environment.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async {
        let state = self.state
        runner = Task {
            let result = try? await Subprocess.run(
                .path(FilePath(executable)), arguments: Arguments(arguments),
                environment: .overriding(environment), input: .none, output: .sequence, error: .combinedWithOutput
            ) { execution in
                state.withLockedValue {
                    $0.execution = execution
                    return $0.started()
                }?.resume()
                for try await chunk in execution.standardOutput {
                    chunk.withUnsafeBytes { bytes in state.withLockedValue { $0.printed += bytes } }
                }
            }
            // A process that could not be started counts as one that ended at once.
            state.withLockedValue {
                $0.termination = result?.terminationStatus ?? .exited(127)
                return $0.started()
            }?.resume()
        }
        await withCheckedContinuation { continuation in
            let running = state.withLockedValue { state in
                if state.execution == nil, state.termination == nil { state.starting = continuation }
                return state.starting == nil
            }
            if running { continuation.resume() }
        }
    }

    deinit {
        state.withLockedValue { state in
            if state.termination == nil { try? state.execution?.send(signal: .kill) }
        }
    }

    /// What it has printed so far.
    public var printed: String { String(decoding: state.withLockedValue { $0.printed }, as: UTF8.self) }

    /// Whether it has ended.
    public var hasExited: Bool { state.withLockedValue { $0.termination != nil } }

    /// Its process id (0 before it has started and once it has ended).
    public var processIdentifier: Int32 {
        state.withLockedValue { $0.termination == nil ? $0.execution?.processIdentifier.value ?? 0 : 0 }
    }

    /// Waits up to `limit` until it has printed `text` (looking every 10 ms).
    ///
    /// - Returns: Whether it has (false once it ended without).
    public func waitForOutput(containing text: String, within limit: Duration) async -> Bool {
        let started = ContinuousClock.now
        while !printed.contains(text) {
            if hasExited || started.duration(to: .now) >= limit { return printed.contains(text) }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Sends `number` (SIGTERM, SIGINT, SIGKILL, …), unless it has ended.
    public func signal(_ number: Int32) {
        state.withLockedValue { state in
            guard state.termination == nil else { return }
            try? state.execution?.send(signal: Signal(rawValue: number))
        }
    }

    /// Waits up to `limit` for it to end by itself (SIGKILL after that).
    ///
    /// - Returns: Its exit status (or the number of the signal that ended it), or nil when it had to be killed.
    public func exitStatus(within limit: Duration) async -> Int32? {
        await endOrKill(within: limit)?.code
    }

    /// Sends SIGTERM and waits up to `limit` for it to end; SIGKILL after that.
    ///
    /// - Returns: How long the exit took, or nil when it had to be killed.
    public func terminate(within limit: Duration) async -> Duration? {
        let started = ContinuousClock.now
        signal(SIGTERM)
        return await endOrKill(within: limit) == nil ? nil : started.duration(to: .now)
    }

    /// Stops it: SIGTERM, then SIGKILL if it has not ended within 30 s; returns once it has ended.
    public func stop() async { _ = await terminate(within: .seconds(30)) }

    /// SIGKILL, no chance to finish anything; returns once it has ended.
    public func kill() async {
        signal(SIGKILL)
        await runner.value
    }

    /// Waits until it has ended by itself.
    ///
    /// - Returns: Its exit status, or the number of the signal that ended it.
    public func exit() async -> Int32 {
        await runner.value
        return state.withLockedValue { $0.termination?.code ?? 0 }
    }

    /// Waits up to `limit` for it to end, then kills it (SIGKILL) and waits for that.
    ///
    /// - Returns: How it ended by itself, or nil when it had to be killed.
    private func endOrKill(within limit: Duration) async -> TerminationStatus? {
        let endedInTime = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.runner.value; return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? true
            if !first { signal(SIGKILL) }  // the first task then ends too
            group.cancelAll()
            return first
        }
        return endedInTime ? state.withLockedValue { $0.termination } : nil
    }
}
