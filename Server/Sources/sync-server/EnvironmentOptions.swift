import ArgumentParser
import Foundation

/// `sync-server serve` takes every option from the environment as well as from the command line, as a container's
/// settings usually come: `SYNC_SERVER_PORT=9000` is `--port 9000`, `SYNC_SERVER_MAX_BODY_SIZE=2097152` is
/// `--max-body-size 2097152`, and a flag's variable is `true` or `false` (`SYNC_SERVER_NO_BATCH=true` is
/// `--no-batch`). A variable gives one value (one `--table`). The command line wins: its options come after these.
/// `DATABASE_URL` and `SYNC_AUTH_HS256_SECRET` keep their own names.
enum EnvironmentOptions {
    static let prefix = "SYNC_SERVER_"

    /// The options the `SYNC_SERVER_*` variables of `environment` stand for, checked as `command` parses them.
    ///
    /// - Throws: `ValidationError` naming the variable, for one that is no option of `command` or whose value it
    ///   refuses (a flag's value is true, false, 1, 0, yes or no).
    static func arguments<Command: ParsableCommand>(
        _ environment: [String: String], for command: Command.Type
    ) throws -> [String] {
        var arguments: [String] = []
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix(prefix) {
            let name = "--" + variable.dropFirst(prefix.count).lowercased().replacingOccurrences(of: "_", with: "-")
            // A flag parses alone; an option needs its value, and the parse checks that value as the command line's.
            if (try? command.parse([name])) != nil {
                switch value.lowercased() {
                case "true", "1", "yes": arguments.append(name)
                case "false", "0", "no", "": break
                default: throw ValidationError("$\(variable) is a flag: true or false, not '\(value)'")
                }
                continue
            }
            do {
                _ = try command.parse([name, value])
            } catch {
                let reason = command.message(for: error)
                throw ValidationError("$\(variable) (\(name)): \(reason.isEmpty ? "not accepted" : reason)")
            }
            arguments += [name, value]
        }
        return arguments
    }

    /// The command line with the environment's options put in front of the serve command's own: after `serve` when
    /// it is named, none for another subcommand (`token`, `help`).
    static func commandLine(_ arguments: [String], environment: [String: String], subcommands: [String]) throws
        -> [String]
    {
        if let first = arguments.first, subcommands.contains(first) {
            guard first == "serve" else { return arguments }
            return [first] + (try Self.arguments(environment, for: Serve.self)) + arguments.dropFirst()
        }
        return try Self.arguments(environment, for: Serve.self) + arguments
    }
}
