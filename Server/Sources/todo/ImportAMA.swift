import ArgumentParser
import Foundation
import OfflineSync

/// `todo import-ama PATH`: carries the to-do list of an app built on the Azure Mobile Apps iOS SDK — its rows, its
/// unsent changes in order, its parked conflicts and its pull position — into this store (see
/// ``AzureMobileAppsImport``).
struct ImportAMA: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-ama",
        abstract: "Import the Azure Mobile Apps iOS SDK's store (its Core Data SQLite file), unsent changes included.",
        discussion: """
            Run it once, on a new store, before the first sync: then `todo sync` sends the old app's
            changes in their order and the next pull is incremental from where the old app stood.
            The old file is only read. TodoItem's attributes are text (string) and complete (boolean);
            name others with --field.
            """)
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The old store: the SQLite file Core Data wrote (such as QSTodoDataModel.sqlite).") var path: String
    @Option(
        name: .customLong("field"),
        help: "Another attribute of TodoItem, NAME:TYPE (string, integer, number, boolean, date, binary, skip).")
    var fields: [String] = []

    func run() async throws {
        var attributes: [String: AzureMobileAppsImport.FieldType] = ["text": .string, "complete": .boolean]
        let types: [String: AzureMobileAppsImport.FieldType] = [
            "string": .string, "integer": .integer, "number": .number, "boolean": .boolean, "date": .date,
            "binary": .binary, "skip": .skip,
        ]
        for field in fields {
            let parts = field.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, let type = types[parts[1].lowercased()] else {
                throw ValidationError(
                    "--field takes NAME:TYPE, TYPE one of \(types.keys.sorted().joined(separator: ", "))")
            }
            attributes[parts[0]] = type
        }
        let file = URL(fileURLWithPath: (path as NSString).expandingTildeInPath)
        try await perform(options) { app in
            let summary: AzureMobileAppsImport.Summary
            do {
                summary = try await app.store.importAzureMobileAppsStore(
                    at: file, tables: [.init("TodoItem", fields: attributes)])
            } catch let error as AzureMobileAppsImport.ImportError {
                throw TodoError("Not imported: \(error.message)")
            }
            if summary.alreadyImported {
                print("Already imported (store \(summary.storeUUID)): nothing changed.")
                return
            }
            let kinds = summary.operations.sorted { $0.key.rawValue < $1.key.rawValue }
                .map { "\($0.value) \($0.key.rawValue)" }.joined(separator: ", ")
            print("Imported \(file.lastPathComponent) (store \(summary.storeUUID)):")
            print("  items: \(summary.rows["TodoItem"] ?? 0)")
            print("  changes waiting to be sent: \(summary.operationCount)\(kinds.isEmpty ? "" : " (\(kinds))")")
            if summary.errors > 0 { print("  conflicts carried: \(summary.errors) (see todo conflicts)") }
            if summary.errorsLeftOut > 0 {
                print("  errors not carried: \(summary.errorsLeftOut) (transient; their changes are sent again)")
            }
            for position in summary.positions {
                print("  pull position: \(position.table)/\(position.queryID) from \(position.since)")
            }
            if summary.positions.contains(where: { $0.queryID != TodoApp.queryID.rawValue }) {
                print("  (todo pulls with the query id \(TodoApp.queryID), the tutorial's)")
            }
            print("Run todo sync to send the changes.")
        }
    }
}
