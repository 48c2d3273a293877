public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A child process started with `posix_spawn`, for the tools and tests that run `sync-server`, `todo` and
/// PostgreSQL as real processes.
///
/// Why not Foundation's `Process`: on Linux (swift-corelibs-foundation up to Swift 6.3.1), `Process.run()`
/// lists `/proc/self/fd` with a 256-byte copy of each `dirent` and crashes now and then (SIGSEGV) when a record
/// ends near an unmapped page (swiftlang/swift-corelibs-foundation#5472) — one test run in four crashed so here.
///
/// The child gets the given standard streams, no other descriptor of the parent, and every signal at its
/// default action and unblocked (a parent that ignores SIGTERM does not pass that on). `isRunning`, the
/// `termination…` properties and `waitUntilExit()` reap it with `waitpid`; it may be used from any thread.
public final class ChildProcess: @unchecked Sendable {  // @unchecked: the mutable state is under `lock`.
    /// How a finished child ended.
    public enum Termination: Equatable, Sendable {
        /// It exited with this status.
        case exit(Int32)
        /// A signal with this number ended it.
        case signal(Int32)
    }

    /// The program's path.
    public var executableURL: URL?
    /// The arguments after the program's name.
    public var arguments: [String] = []
    /// The whole environment; nil passes on the parent's.
    public var environment: [String: String]?
    /// Standard input, output and error: a `Pipe`, a `FileHandle`, or nil for the parent's.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    private let lock = NSLock()
    private var pid: pid_t = 0
    private var ended: Termination?

    public init() {}

    /// The child's process id (0 before ``run()``).
    public var processIdentifier: Int32 { lock.withLock { pid } }

    /// Starts the child.
    ///
    /// - Throws: `POSIXError` when it cannot be started (for example a missing executable).
    public func run() throws {
        guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        for (stream, target) in [(standardInput, 0), (standardOutput, 1), (standardError, 2)] as [(Any?, Int32)] {
            let descriptor: Int32? =
                switch stream {
                case let pipe as Pipe:
                    target == 0 ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
                case let handle as FileHandle: handle.fileDescriptor
                default: nil
                }
            switch descriptor {
            case nil: break
            case let descriptor? where descriptor >= 0:
                posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            default:  // FileHandle.nullDevice has no descriptor
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        var noSignal = sigset_t()
        sigemptyset(&noSignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignal)
        var flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        #if canImport(Darwin)
            flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #else
            Self.closeFromThree(&actions)
        #endif
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let environment =
            (self.environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0)=\($1)") } + [nil]
        defer { (argv + environment).forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, path, &actions, &attributes, argv, environment)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        lock.withLock { pid = child }
        // The child has its copies; the parent's ends it passed on are closed, so that readers see the end.
        for case let pipe as Pipe in [standardOutput, standardError] { try? pipe.fileHandleForWriting.close() }
        if let pipe = standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
    }

    /// Whether the child has been started and has not ended.
    public var isRunning: Bool { processIdentifier != 0 && poll() == nil }

    /// How the child ended, once it has (nil while it runs).
    public var termination: Termination? { poll() }

    /// The exit status, or the number of the signal that ended the child (as Foundation's `Process` reports it).
    public var terminationStatus: Int32 {
        switch poll() {
        case .exit(let status), .signal(let status): status
        case nil: 0
        }
    }

    /// Sends SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// Sends `number` to the child, unless it has already been reaped.
    public func signal(_ number: Int32) {
        lock.withLock {
            if pid != 0, ended == nil { _ = kill(pid, number) }
        }
    }

    /// Blocks until the child ends.
    public func waitUntilExit() { _ = reap(blocking: true) }

    #if !canImport(Darwin)
        /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift does not import.
        private static let addCloseFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
            unsafeBitCast(
                $0, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
        }

        /// Adds the actions that close every descriptor from 3 up in the child: one action where glibc has it,
        /// else one per descriptor open now (listed with FileManager, whose `dirent` reading is sound).
        private static func closeFromThree(_ actions: inout posix_spawn_file_actions_t) {
            if let addCloseFrom, addCloseFrom(&actions, 3) == 0 { return }
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            // A descriptor closed meanwhile is no failure: glibc ignores EBADF for a close action.
            for descriptor in open.compactMap(Int32.init) where descriptor >= 3 {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        }
    #endif

    private func reap(blocking: Bool) -> Termination? {
        while true {
            if let ended = poll() { return ended }
            if !blocking || processIdentifier == 0 { return nil }
            usleep(2_000)
        }
    }

    /// Reaps the child if it has ended; how it ended, once it has.
    private func poll() -> Termination? {
        lock.withLock {
            var status: Int32 = 0
            if ended == nil, pid != 0, waitpid(pid, &status, WNOHANG) == pid {
                // WIFSIGNALED, WTERMSIG and WEXITSTATUS are macros that Swift does not import.
                let signal = status & 0x7f
                ended = signal == 0 ? .exit((status >> 8) & 0xff) : .signal(signal)
            }
            return ended
        }
    }
}
