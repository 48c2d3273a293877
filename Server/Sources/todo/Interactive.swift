import ArgumentParser
import Foundation

/// The prompt loop of `todo` with no command: the same commands, one per line, plus `help` and `quit`.
struct Interactive {
    let options: GlobalOptions

    func run() async throws {
        print(
            "todo — type a command (help for the list, quit to leave). Store: \(options.storePath), server: \(options.serverURL)"
        )
        while true {
            FileHandle.standardOutput.write(Data("todo> ".utf8))
            guard let line = readLine() else { print(); return }
            let words = Self.split(line)
            guard let first = words.first else { continue }
            if ["quit", "exit"].contains(first) { return }
            if first == "help" {
                print(TodoCommand.helpMessage())
                continue
            }
            var arguments = words
            if let store = options.store { arguments += ["--store", store] }
            if let url = options.url { arguments += ["--url", url] }
            if let wireProtocol = options.wireProtocol { arguments += ["--protocol", wireProtocol] }
            if let token = options.token { arguments += ["--token", token] }
            if let tokenFile = options.tokenFile { arguments += ["--token-file", tokenFile] }
            do {
                try await Session.runCommandLine(arguments)
            } catch let exit as ExitCode where exit != .success {
                continue  // the command printed its message
            } catch {
                print(TodoCommand.message(for: error))
            }
        }
    }

    /// Splits a line into words; single or double quotes keep spaces together.
    static func split(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character.isWhitespace {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }
}

/// `todo session` (not in the help): the commands of a program that drives `todo` — one JSON array of arguments per
/// line of standard input, run one after another in this one process. After each, a line of U+001E, `exit` and the
/// status the command would have exited with as a process of its own is written to standard output and then to
/// standard error, so the program knows where each command's output ends on both. It ends at the end of its input.
///
/// A process start costs more than most commands (about 40 ms of CPU in a debug build, the dynamic loader and the
/// runtime's first conformance lookups): `sync-chaos` runs each device's hundreds of commands this way, and kills
/// the session (SIGKILL) to kill a command mid-way.
struct Session: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run commands read as JSON arrays of arguments, one per line (for programs).", shouldDisplay: false)

    /// The line that ends a command's output: U+001E (record separator), `exit`, the status.
    static func endLine(status: Int32) -> String { "\u{1E}exit \(status)" }

    func run() async throws {
        while let line = readLine() {
            let status: Int32
            do {
                let arguments = try JSONDecoder().decode([String].self, from: Data(line.utf8))
                status = await Self.perform(arguments)
            } catch {
                FileHandle.standardError.write(Data("todo: not a JSON array of arguments: \(line.prefix(200))\n".utf8))
                status = ExitCode.validationFailure.rawValue
            }
            print(Self.endLine(status: status))
            fflush(nil)  // every output stream: what print() buffered comes before the end line on standard error
            FileHandle.standardError.write(Data((Self.endLine(status: status) + "\n").utf8))
        }
    }

    /// Parses `arguments` as a command line of `todo` (without the program's name) and runs the command, in this
    /// process: the prompt's commands and a session's. A line with no command (a prompt or a session in a prompt or
    /// a session) is refused.
    ///
    /// - Throws: What parsing or the command throws, as ArgumentParser's `exit(withError:)` takes it.
    static func runCommandLine(_ arguments: [String]) async throws {
        var command = try parse(arguments)
        guard !(command is TodoCommand), !(command is Session) else {
            throw ValidationError("Give a command (not a prompt or a session within one)")
        }
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    }

    /// Parses `arguments` as `todo`'s command line. A debug build of ArgumentParser checks the definition of every
    /// command it builds, on every parse: about 20 ms from the root against 7 ms for the one subcommand (in a chaos seed,
    /// that was half of the devices' CPU). So when the first argument names a subcommand, that subcommand alone is
    /// parsed first, and its answer kept only when it is one of that subcommand's own commands; anything else (an
    /// error, ArgumentParser's help command, a completion script) is parsed again from the root, whose command or error
    /// is the one a process of its own would have.
    ///
    /// - Throws: What `TodoCommand.parseAsRoot` throws for `arguments`.
    static func parse(_ arguments: [String]) throws -> any ParsableCommand {
        func tree(_ command: any ParsableCommand.Type) -> [any ParsableCommand.Type] {
            [command] + command.configuration.subcommands.flatMap(tree)
        }
        if let name = arguments.first,
            let subcommand = TodoCommand.configuration.subcommands.first(where: {
                $0._commandName == name || $0.configuration.aliases.contains(name)
            }),
            let command = try? subcommand.parseAsRoot(Array(arguments.dropFirst())),
            tree(subcommand).contains(where: { $0 == type(of: command) })
        {
            return command
        }
        return try TodoCommand.parseAsRoot(arguments)
    }

    /// Runs one command as `todo` would run it alone: its error's message printed as ArgumentParser prints it.
    ///
    /// - Returns: The status the process would have exited with.
    static func perform(_ arguments: [String]) async -> Int32 {
        do {
            try await runCommandLine(arguments)
            return ExitCode.success.rawValue
        } catch {
            let code = TodoCommand.exitCode(for: error)
            let message = TodoCommand.fullMessage(for: error)
            if !message.isEmpty {
                if code == .success {
                    print(message)
                } else {
                    FileHandle.standardError.write(Data((message + "\n").utf8))
                }
            }
            return code.rawValue
        }
    }
}
