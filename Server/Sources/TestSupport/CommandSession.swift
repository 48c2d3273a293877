import Foundation
import NIOConcurrencyHelpers
import Subprocess

#if canImport(System)
    import System
#else
    import SystemPackage
#endif

/// A program that runs commands sent to its standard input one per line, in one long-lived process (`todo session`):
/// after each command it writes an end line — U+001E, `exit`, the status the command would have exited with as a
/// process of its own — to its standard output and then to its standard error. A process start can cost more than
/// the command (about 40 ms of CPU for a debug `todo`), and a tool that runs hundreds saves most of its CPU this way.
///
/// A command killed mid-way (SIGKILL) ends the process; the next command starts another, as an app started again
/// would. A session dropped while its process runs kills it (SIGKILL), so nothing outlives the tool that started it.
/// A command's end is known from the end lines, or from the end of both outputs: a child the program leaves with
/// them open keeps a killed command waiting until that child ends.
public final class CommandSession: Sendable {
    private let executable: String
    private let arguments: [String]
    private let environment: [String: String]
    private let started: @Sendable (Int32) -> Void
    private let ended: @Sendable (Int32) -> Void
    private let current = NIOLockedValueBox<SessionProcess?>(nil)
    private let starts = NIOLockedValueBox(0)

    /// A session of `executable` started with `arguments` (the process starts with the first command).
    ///
    /// - Parameters:
    ///   - environment: Variables set over this process's own environment.
    ///   - started: Called with each process's id once it runs (a tool that must kill its children on a signal
    ///     keeps it), and `ended` once it has ended.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        started: @escaping @Sendable (Int32) -> Void = { _ in }, ended: @escaping @Sendable (Int32) -> Void = { _ in }
    ) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.started = started
        self.ended = ended
        _ = Self.brokenPipesIgnored
    }

    /// A command killed before its line was written leaves a write to a pipe no one reads: without this, SIGPIPE ends
    /// the whole tool (a test run ended by signal 13); with it, the write fails with EPIPE, which the session ignores.
    private static let brokenPipesIgnored: Void = { signal(SIGPIPE, SIG_IGN) }()

    deinit { current.withLockedValue { $0 }?.signal(.kill) }

    /// Sends `line` (one command) and waits for the command's end lines, or kills it with SIGKILL after `killAfter`.
    ///
    /// - Parameter timeout: SIGTERM after this long, SIGKILL 5 s later.
    /// - Returns: What the command printed (without its end lines) and its status; a command the process ended
    ///   during has the process's status (or signal), and `wasKilled` when `killAfter` killed it.
    /// - Throws: `SubprocessError` when no process can be started. Cancellation is not checked: the command runs to
    ///   its end or its timeout.
    public func run(_ line: String, killAfter: Duration? = nil, timeout: Duration = .seconds(30)) async throws
        -> CommandResult
    {
        let process: SessionProcess
        if let running = current.withLockedValue({ $0 }), !running.hasEnded {
            process = running
        } else {
            process = try await SessionProcess(
                executable: executable, arguments: arguments, environment: environment, started: started,
                ended: ended)
            current.withLockedValue { $0 = process }
            starts.withLockedValue { $0 += 1 }
        }
        return await process.run(line, killAfter: killAfter, timeout: timeout)
    }

    /// Closes the process's input and waits for it to end by itself (SIGKILL after 10 s).
    public func close() async { await current.withLockedValue({ $0 })?.close() }

    /// How many processes it has started: one, and one more after each that a command ended.
    public var processesStarted: Int { starts.withLockedValue { $0 } }
}

/// One process of a ``CommandSession``.
private final class SessionProcess: Sendable {
    typealias Running = Execution<CustomWriteInput, SequenceOutput, SequenceOutput>

    private struct State {
        var execution: Running?
        /// What the command running now has printed on standard output and on standard error.
        var output: [UInt8] = []
        var error: [UInt8] = []
        /// The number of the command running now (or last), so that a signal due to one never falls on another.
        var command = 0
        /// Whether the command running now has written its end line on both.
        var commandEnded = false
        /// Whether a signal was sent during the command, and whether it was `killAfter`'s.
        var signalled = false
        var killedOnPurpose = false
        var termination: TerminationStatus?
        /// The command's caller, waiting for its end (or the process's).
        var waiter: CheckedContinuation<Void, Never>?

        mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
            defer { waiter = nil }
            return waiter
        }
    }

    private let state = NIOLockedValueBox(State())
    private let input: AsyncStream<String>.Continuation
    private let runner: Task<Void, Never>

    init(
        executable: String, arguments: [String], environment: [String: String],
        started: @escaping @Sendable (Int32) -> Void, ended: @escaping @Sendable (Int32) -> Void
    ) async throws {
        let (lines, input) = AsyncStream<String>.makeStream()
        self.input = input
        let state = self.state
        let (outcomes, outcome) = AsyncStream<Result<Void, any Error>>.makeStream()
        runner = Task {
            var pid: Int32 = 0
            do {
                let result = try await Subprocess.run(
                    .path(FilePath(executable)), arguments: Arguments(arguments),
                    environment: .overriding(environment), input: .inputWriter, output: .sequence, error: .sequence
                ) { execution in
                    pid = execution.processIdentifier.value
                    state.withLockedValue { $0.execution = execution }
                    started(pid)
                    outcome.yield(.success(()))
                    // Its input is written until the session closes or its outputs end (the process has ended).
                    let writer = execution.standardInputWriter
                    let writing = Task {
                        for await line in lines { _ = try await writer.write(line + "\n") }
                        try await writer.finish()
                    }
                    async let output: Void = Self.read(execution.standardOutput, isError: false, state)
                    async let error: Void = Self.read(execution.standardError, isError: true, state)
                    _ = try await (output, error)
                    writing.cancel()
                    _ = await writing.result
                }
                state.withLockedValue { $0.termination = result.terminationStatus }
            } catch {
                state.withLockedValue { $0.termination = $0.termination ?? .exited(127) }
                outcome.yield(.failure(error))
            }
            if pid != 0 { ended(pid) }
            state.withLockedValue { $0.takeWaiter() }?.resume()
        }
        for await started in outcomes {
            try started.get()
            return
        }
    }

    var hasEnded: Bool { state.withLockedValue { $0.termination != nil } }

    /// Reads its standard output (its standard error when `isError`), waking the command's caller once both have
    /// their end line.
    private static func read(
        _ stream: SubprocessOutputSequence, isError: Bool, _ state: NIOLockedValueBox<State>
    ) async throws {
        for try await chunk in stream {
            let waiter = chunk.withUnsafeBytes { bytes in
                state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                    if isError { state.error += bytes } else { state.output += bytes }
                    guard endStatus(state.output) != nil, endStatus(state.error) != nil else { return nil }
                    state.commandEnded = true
                    return state.takeWaiter()
                }
            }
            waiter?.resume()
        }
    }

    /// The status on the end line that closes `bytes` (U+001E `exit N` and a line break), or nil until it has come.
    private static func endStatus(_ bytes: [UInt8]) -> Int32? {
        guard bytes.last == UInt8(ascii: "\n"), let start = bytes.lastIndex(of: 0x1E) else { return nil }
        let line = String(decoding: bytes[(start + 1)..<(bytes.count - 1)], as: UTF8.self)
        guard line.hasPrefix("exit ") else { return nil }
        return Int32(line.dropFirst(5))
    }

    /// What a command printed before its end line.
    private static func beforeEndLine(_ bytes: [UInt8]) -> String {
        String(decoding: bytes[..<(bytes.lastIndex(of: 0x1E) ?? bytes.endIndex)], as: UTF8.self)
    }

    /// Sends `line` and waits for the command's end, or the process's; signals it on `killAfter` and `timeout`.
    func run(_ line: String, killAfter: Duration?, timeout: Duration) async -> CommandResult {
        let command = state.withLockedValue { state in
            state.command += 1
            (state.output, state.error, state.commandEnded, state.signalled, state.killedOnPurpose) =
                ([], [], false, false, false)
            return state.command
        }
        input.yield(line)
        let timer = Task {
            if let killAfter {
                try await Task.sleep(for: killAfter)
                signal(.kill, during: command, onPurpose: true)
            }
            try await Task.sleep(for: timeout - (killAfter ?? .zero))
            signal(.terminate, during: command, onPurpose: false)
            try await Task.sleep(for: .seconds(5))
            signal(.kill, during: command, onPurpose: false)
        }
        await withCheckedContinuation { continuation in
            let done = state.withLockedValue { state in
                if state.commandEnded || state.termination != nil { return true }
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
        timer.cancel()
        // A signal sent as the command wrote its end lines ends the process all the same (SIGKILL, should SIGTERM not
        // be enough): wait for that, so that the next command starts another instead of writing to this one as it dies.
        if state.withLockedValue({ $0.signalled && $0.termination == nil }) {
            signal(.kill)
            await runner.value
        }
        return state.withLockedValue { state in
            if state.commandEnded, let status = Self.endStatus(state.output) {
                return CommandResult(
                    status: status, output: Self.beforeEndLine(state.output), error: Self.beforeEndLine(state.error),
                    wasKilled: false)
            }
            let status = state.termination ?? .exited(127)
            return CommandResult(
                status: status.code, output: String(decoding: state.output, as: UTF8.self),
                error: String(decoding: state.error, as: UTF8.self),
                wasKilled: state.killedOnPurpose && status == .signaled(SIGKILL))
        }
    }

    /// Sends `signal` while command number `command` runs — never once it has ended: the process is idle then, or
    /// runs the next command, which the signal must not fall on.
    private func signal(_ signal: Signal, during command: Int, onPurpose: Bool) {
        state.withLockedValue { state in
            guard state.command == command, !state.commandEnded, state.termination == nil,
                let execution = state.execution
            else { return }
            state.signalled = true
            if onPurpose { state.killedOnPurpose = true }
            try? execution.send(signal: signal)
        }
    }

    /// Sends `signal` unless it has ended.
    func signal(_ signal: Signal) {
        state.withLockedValue { state in
            guard state.termination == nil else { return }
            try? state.execution?.send(signal: signal)
        }
    }

    /// Closes its input and waits for it to end (SIGKILL after 10 s).
    func close() async {
        input.finish()
        let killer = Task {
            try await Task.sleep(for: .seconds(10))
            signal(.kill)
        }
        await runner.value
        killer.cancel()
    }
}
