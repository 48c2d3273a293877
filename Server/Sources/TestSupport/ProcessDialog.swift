import Subprocess

#if canImport(System)
    import System
#else
    import SystemPackage
#endif

/// A child process spoken with line by line: what it prints, read as it comes, and lines written to its standard
/// input. Valid only inside ``withProcessDialog(_:_:_:)``'s body.
public final class ProcessDialog {
    private var lines: SubprocessOutputSequence.StringSequence<UTF8>.AsyncIterator
    private let writer: StandardInputWriter

    init(lines: SubprocessOutputSequence.StringSequence<UTF8>.AsyncIterator, writer: StandardInputWriter) {
        self.lines = lines
        self.writer = writer
    }

    /// The next line it prints (without its line break), or nil once its output has ended.
    ///
    /// - Throws: `SubprocessError` when its output cannot be read.
    public func nextLine() async throws -> String? { try await lines.next() }

    /// Writes `line` and a line break to its standard input.
    ///
    /// - Throws: `SubprocessError` when its input is closed.
    public func send(_ line: String) async throws { _ = try await writer.write(line + "\n") }
}

/// Starts `executable` with `arguments`, runs `body` with a dialog with it, then closes its input and waits for it
/// to end; when `body` throws (or the task is cancelled) the process is killed first. Nothing outlives the call.
///
/// - Returns: What `body` returned.
/// - Throws: `SubprocessError` when it cannot be started, or what `body` throws.
public func withProcessDialog<T: Sendable>(
    _ executable: String, _ arguments: [String], _ body: (ProcessDialog) async throws -> T
) async throws -> T {
    try await Subprocess.run(
        .path(FilePath(executable)), arguments: Arguments(arguments), input: .inputWriter, output: .sequence,
        error: .discarded
    ) { execution in
        let dialog = ProcessDialog(
            lines: execution.standardOutput.strings().makeAsyncIterator(), writer: execution.standardInputWriter)
        return try await body(dialog)
    }.closureResult
}
