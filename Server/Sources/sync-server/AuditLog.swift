import Foundation
import SyncServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The file of `--audit-log`: committed writes appended as JSON lines, each with one `write(2)` to a file opened for
/// appending, so that a line is whole and in the file once the hook returns (the process may die next).
struct AuditLog: Sendable {
    private let descriptor: Int32

    /// Opens (or creates) the file for appending.
    ///
    /// - Throws: ``ConfigurationError`` when it cannot be opened.
    init(path: String) throws {
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw ConfigurationError("--audit-log: cannot open \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Appends one committed write.
    ///
    /// - Throws: `POSIXError` when the line cannot be written whole (the write is delivered again later).
    @Sendable func append(_ write: CommittedWrite) throws {
        let line: JSONValue = [
            "sequence": .int(write.sequence), "table": .string(write.table.rawValue),
            "kind": .string(write.kind.rawValue), "item": write.item,
        ]
        let bytes = Array((line.serialized() + "\n").utf8)
        let written = bytes.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
