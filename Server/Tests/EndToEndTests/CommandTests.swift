import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The child processes tests and tools run (TestSupport's `runCommand`, on swift-subprocess): exit statuses, output
/// and error, signals, time limits, cancellation, and that a child inherits no other descriptor of the parent (which
/// would keep another child's pipe open).
@Suite struct CommandTests {
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
