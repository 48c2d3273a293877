import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The child processes tests and tools run (TestSupport's `runCommand`, on swift-subprocess): exit statuses, output
/// and error, signals, time limits, cancellation, and that a child inherits no other descriptor of the parent (which
/// would keep another child's pipe open).
@Suite(.timeLimit(.minutes(3))) struct CommandTests {
    @Test func exitStatusOutputErrorAndEnvironment() async throws {
        let result = try await runCommand(
            "/bin/sh", ["-c", "echo $GREETING; echo oops >&2; exit 7"], environment: ["GREETING": "hello"])
        #expect(result.status == 7)
        #expect(result.output == "hello\n")
        #expect(result.error == "oops\n")
        #expect(!result.wasKilled)
    }

    @Test func aTimeoutEndsItWithSIGTERM() async throws {
        // Ended by the signal, not by itself 30 s later.
        let result = try await runCommand("/bin/sleep", ["30"], timeout: .milliseconds(200))
        #expect(result.status == SIGTERM)
        #expect(!result.wasKilled)
    }

    @Test func killAfterKillsItAtOnce() async throws {
        let result = try await runCommand("/bin/sleep", ["30"], killAfter: .milliseconds(100))
        #expect(result.status == SIGKILL)
        #expect(result.wasKilled)
    }

    @Test func aCancelledRunLeavesNoProcess() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pid-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let run = Task { try await runCommand("/bin/sh", ["-c", "echo $$ > \(file.path); exec sleep 30"]) }
        var pid: Int32?
        for _ in 0..<500 where pid == nil {
            try await Task.sleep(for: .milliseconds(10))
            pid = (try? String(contentsOf: file, encoding: .utf8)).flatMap {
                Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        let child = try #require(pid)
        run.cancel()
        _ = try? await run.value
        // Reaped: no process, not even a zombie, has the id any more.
        #expect(kill(child, 0) == -1 && errno == ESRCH)
    }

    @Test func theChildHasOnlyItsThreeStandardDescriptors() async throws {
        // Descriptors the parent holds open (a pipe here) must not reach the child.
        let held = Pipe()
        defer { try? held.fileHandleForWriting.close() }
        let result = try await runCommand("/bin/sh", ["-c", "ls /proc/$$/fd"])
        #expect(result.status == 0)
        // `ls` itself opens the directory, which shows as one more descriptor at most.
        let descriptors = result.output.split(separator: "\n").compactMap { Int($0) }
        #expect(descriptors.filter { $0 > 3 } == [], "inherited: \(descriptors)")
    }

    @Test func aMissingExecutableThrows() async {
        await #expect(throws: (any Error).self) { try await runCommand("/nonexistent/program", []) }
    }
}

/// TestSupport's `CommandSession`: commands run one after another in one process (a shell reading lines here, which
/// speaks the protocol `todo session` speaks), each with its own output, error and status; a command killed or
/// ending the process leaves the next one a new process; a kill never falls on the next command.
@Suite(.timeLimit(.minutes(3))) struct CommandSessionTests {
    /// A shell that runs each line it reads, then writes the end line on both outputs.
    static func shell() -> CommandSession {
        CommandSession(
            "/bin/sh",
            [
                "-c",
                #"while IFS= read -r line; do eval "$line"; s=$?; printf '\036exit %d\n' $s; printf '\036exit %d\n' $s >&2; done"#,
            ],
            environment: ["GREETING": "hello"])
    }

    /// A command that waits 10 s: the shell waits for a `sleep` that holds none of its outputs (which would keep
    /// them open past the shell's end), so that a killed shell leaves nothing that uses the CPU (a busy loop of the
    /// shell's own, orphaned when a test run died, kept a core busy for 47 minutes).
    static let wait = "sleep 10 </dev/null >/dev/null 2>&1 & wait $!"

    @Test func commandsShareOneProcessEachWithItsOwnOutputAndStatus() async throws {
        let session = Self.shell()
        let first = try await session.run("echo $GREETING $$; echo oops >&2; false")
        #expect(first.status == 1 && first.error == "oops\n" && !first.wasKilled)
        let second = try await session.run("echo again $$")
        #expect(second.status == 0 && second.error == "")
        let pid = try #require(first.output.split(separator: " ").last).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(first.output == "hello \(pid)\n" && second.output == "again \(pid)\n")
        #expect(session.processesStarted == 1)
        await session.close()
    }

    @Test func aKilledCommandEndsItsProcessAndTheNextStartsAnother() async throws {
        let session = Self.shell()
        let before = try await session.run("echo $$")
        let killed = try await session.run("echo started; \(Self.wait)", killAfter: .milliseconds(200))
        #expect(killed.status == SIGKILL && killed.wasKilled && killed.output == "started\n")
        let after = try await session.run("echo $$")
        #expect(after.status == 0 && after.output != before.output)
        #expect(session.processesStarted == 2)
        // A command that ends the process is no kill: its status, and a new process next.
        let exited = try await session.run("exit 3")
        #expect(exited.status == 3 && !exited.wasKilled)
        #expect(try await session.run("true").status == 0)
        #expect(session.processesStarted == 3)
        await session.close()
    }

    @Test func aKillDueAfterTheCommandEndedFallsOnNothing() async throws {
        let session = Self.shell()
        let quick = try await session.run("echo quick", killAfter: .milliseconds(100))
        #expect(quick.status == 0 && !quick.wasKilled)
        try await Task.sleep(for: .milliseconds(300))
        let next = try await session.run("sleep 0.2; echo next")
        #expect(next.status == 0 && next.output == "next\n" && !next.wasKilled)
        #expect(session.processesStarted == 1)
        await session.close()
    }

    /// Kills due about when each command ends: every command either ends by itself or is killed, and none meets a kill
    /// meant for the one before. Before the fix, a SIGKILL sent as a command wrote its end lines left the next command
    /// to a dying process (sync-chaos: a `todo list` that ended with status 9, killed by no one).
    @Test func killsDueAsCommandsEndNeverFallOnTheNext() async throws {
        let session = Self.shell()
        var random = SystemRandomNumberGenerator()
        var (ended, killed) = (0, 0)
        for index in 0..<300 {
            let result = try await session.run(
                "echo \(index)", killAfter: .microseconds(Int.random(in: 0..<3_000, using: &random)))
            if result.wasKilled {
                killed += 1
            } else {
                #expect(result.status == 0 && result.output == "\(index)\n", "\(index): \(result)")
                ended += 1
            }
        }
        // Alone, some commands end and some are killed (both, in 37 runs of 2026-11-28). In the whole suite the
        // timers may wake only after every command ended (0 killed of 300 in one run): then nothing fell on a next
        // command either, which is what this checks (the expectation above, for each command not killed).
        print("killsDueAsCommandsEndNeverFallOnTheNext: \(ended) ended, \(killed) killed")
        await session.close()
    }

    @Test func aTimeoutEndsTheCommandWithSIGTERM() async throws {
        let session = Self.shell()
        let result = try await session.run(Self.wait, timeout: .milliseconds(200))
        #expect(result.status == SIGTERM && !result.wasKilled)
        await session.close()
    }

    @Test func aMissingExecutableThrows() async {
        let session = CommandSession("/nonexistent/program", [])
        await #expect(throws: (any Error).self) { try await session.run("true") }
    }
}
