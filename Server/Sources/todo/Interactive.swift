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
                var command = try TodoCommand.parseAsRoot(arguments)
                if var asyncCommand = command as? any AsyncParsableCommand {
                    try await asyncCommand.run()
                } else {
                    try command.run()
                }
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
