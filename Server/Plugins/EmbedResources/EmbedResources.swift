import Foundation
import PackagePlugin

/// Compiles the text files of a target's `Resources` folder into it as `EmbeddedResources.files`, so that the
/// target's binary needs no resource bundle at run time and runs when copied anywhere (an image, `/usr/local/bin`).
/// The target excludes the folder (`exclude: ["Resources"]`); the files stay ordinary files to edit.
@main struct EmbedResources: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let folder = target.directoryURL.appending(path: "Resources")
        let files = try FileManager.default.contentsOfDirectory(
            at: folder, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles]
        ).sorted { $0.path < $1.path }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedResources.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(files.count) resource files in \(target.name)",
                executable: try context.tool(named: "embed-resources").url,
                arguments: [output.path] + files.map(\.path),
                inputFiles: files,
                outputFiles: [output])
        ]
    }
}
