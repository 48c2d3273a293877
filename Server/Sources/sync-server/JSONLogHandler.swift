import Foundation
import Logging

/// Logs one JSON object per line on standard output, for a log collector (`--log-format json`):
/// `{"time":"2026-12-07T09:15:02.118Z","level":"info","label":"sync-server","message":"…","metadata":{…}}`,
/// `metadata` only when there is some. Each line is one write, so lines of concurrent tasks never interleave.
struct JSONLogHandler: LogHandler {
    /// One line's fields.
    struct Line: Encodable {
        let time: String
        let level: String
        let label: String
        let message: String
        let metadata: [String: String]?
    }

    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(
        level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?, source: String, file: String,
        function: String, line: UInt
    ) {
        Self.write(
            level: level, label: label, message: message.description,
            metadata: metadata.merging(extra ?? [:]) { _, new in new })
    }

    /// Writes one line, whatever the handler's level.
    static func write(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) {
        let line = Line(
            time: Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
            level: level.rawValue, label: label, message: message,
            metadata: metadata.isEmpty ? nil : metadata.mapValues(\.description))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        guard var data = try? encoder.encode(line) else { return }
        data.append(UInt8(ascii: "\n"))
        FileHandle.standardOutput.write(data)
    }
}
