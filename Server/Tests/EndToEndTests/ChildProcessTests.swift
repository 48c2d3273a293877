import ChildProcesses
import Foundation
import Testing

/// The `posix_spawn` child processes that the tools and these tests run (`ChildProcess`, used instead of
/// Foundation's `Process`, which crashes now and then on Linux): exit statuses, signals, standard streams, and
/// that a child inherits no other descriptor of the parent (which would keep another child's pipe open).
@Suite struct ChildProcessTests {
    /// Runs `/bin/sh -c script`, its output to a pipe, and returns (termination, output).
    static func shell(_ script: String, input: Any? = FileHandle.nullDevice) throws -> (
        ChildProcess.Termination?, String
    ) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.environment = ["GREETING": "hello"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = input
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.termination, text)
    }

    @Test func exitStatusOutputAndEnvironment() throws {
        let (termination, output) = try Self.shell("echo $GREETING; exit 7")
        #expect(termination == .exit(7))
        #expect(output == "hello\n")
    }

    @Test func aSignalEndsIt() throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["30"]
        try process.run()
        #expect(process.isRunning)
        process.terminate()
        process.waitUntilExit()
        #expect(!process.isRunning)
        #expect(process.termination == .signal(SIGTERM))
        #expect(process.terminationStatus == SIGTERM)
    }

    @Test func theChildHasOnlyItsThreeStandardDescriptors() throws {
        // Descriptors the parent holds open (a pipe here) must not reach the child.
        let held = Pipe()
        defer { try? held.fileHandleForWriting.close() }
        let (termination, output) = try Self.shell("ls /proc/$$/fd")
        #expect(termination == .exit(0))
        // `ls` itself opens the directory, which shows as one more descriptor at most.
        let descriptors = output.split(separator: "\n").compactMap { Int($0) }
        #expect(descriptors.filter { $0 > 3 } == [], "inherited: \(descriptors)")
    }

    @Test func inputFromAPipe() throws {
        let input = Pipe()
        input.fileHandleForWriting.write(Data("one two\n".utf8))
        try input.fileHandleForWriting.close()
        let (termination, output) = try Self.shell("read a b; echo $b", input: input)
        #expect(termination == .exit(0))
        #expect(output == "two\n")
    }

    @Test func aMissingExecutableThrows() {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/nonexistent/program")
        #expect(throws: POSIXError.self) { try process.run() }
        #expect(!process.isRunning)
    }
}
