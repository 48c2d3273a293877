import Crypto
import Foundation
import OfflineSync
import SyncCore
import SyncSQLite
import SyncServer
import TestSupport

/// The attachment cases (issue 33, docs/attachments.md): a file moved by the SDK — attached, then uploaded in parts
/// by a push (with the row that names it), or downloaded in parts by `file(for:field:)` into the store's folder —
/// beside one bare `PUT` of a file of the same size read into memory beforehand, or one bare `GET` whose body is
/// written to a file and synced, on the same server (through the same link with `--link`), in MB/s; the bytes a
/// push sends again after the reply of the part that crosses 90 % is lost; and a client's peak memory while it moves
/// a 1 GB file each way.
extension Cases {
    /// The file size of the transfer cases: 50 MB (10 MB with `--quick`).
    var attachmentSize: Int { quick ? 10_000_000 : 50_000_000 }

    /// `attachments.upload` and `attachments.download`, on loopback or through `link`.
    func attachmentTransfers(link: LinkProfile? = nil) async throws -> [BenchResult] {
        let size = attachmentSize
        var uploads: [(ours: Double, bare: Double)] = []
        var downloads: [(ours: Double, bare: Double)] = []
        for run in 0..<repetitions {
            let serverPath = path("attachments-server")
            let (upload, download) = try await BenchServer.run(.sqlite(path: serverPath), attachments: true) { server in
                var proxy: FaultProxy?
                if let link { proxy = try await FaultProxy(profile: link, upstreamPort: server.url.port ?? 0) }
                let url = proxy.map { URL(string: "http://127.0.0.1:\($0.port)")! } ?? server.url
                let file = try Self.writeFile(size: size, seed: UInt64(run), in: directory)
                let bare = try Self.writeFile(size: size, seed: UInt64(1_000 + run), in: directory)
                defer {
                    try? FileManager.default.removeItem(at: file)
                    try? FileManager.default.removeItem(at: bare)
                }
                let phone = try await client(url, store: "attachments-phone")
                let table = try phone.syncTable("TodoItem", of: JSONValue.self)
                try await table.insert(["id": "with-file", "text": "A photo", "complete": false])
                try await table.attach(contentsOf: file, to: try ItemID("with-file"), field: "file")
                let ours = try await Measure.seconds {
                    let pushed = try await phone.push().pushedCount
                    guard pushed == 1 else { throw BenchError("the attachment's push pushed \(pushed) of 1") }
                }
                let bareData = try Data(contentsOf: bare)
                let bareHash = Self.sha256(bareData)
                let transport = Self.transport(named: transport)
                let attachments = url.appendingPathComponent("tables/TodoItem/attachments")
                let put = try await Self.barePut(bareData, to: attachments.appendingPathComponent(bareHash), transport)
                let upload = (ours: Double(size) / 1e6 / ours, bare: Double(size) / 1e6 / put)

                let tablet = try await client(url, store: "attachments-tablet")
                let theirs = try tablet.syncTable("TodoItem", of: JSONValue.self)
                try await theirs.pull()
                let downloaded = try await Measure.seconds {
                    let local = try await theirs.file(for: try ItemID("with-file"), field: "file")
                    guard let local, Self.fileSize(local) == size else {
                        throw BenchError("the download is not whole")
                    }
                }
                let get = try await Self.bareGet(
                    attachments.appendingPathComponent(bareHash), size: size, transport,
                    into: directory.appendingPathComponent("bare-\(UUID().uuidString)"))
                await proxy?.stop()
                return (upload, (ours: Double(size) / 1e6 / downloaded, bare: Double(size) / 1e6 / get))
            }
            uploads.append(upload)
            downloads.append(download)
        }
        let suffix = link.map { "@\($0.name)" } ?? ""
        return [
            BenchResult(
                name: "attachments.upload" + suffix, ours: Measure.median(uploads.map(\.ours)),
                reference: Measure.median(uploads.map(\.bare)), unit: "MB/s", higherIsBetter: true, n: size),
            BenchResult(
                name: "attachments.download" + suffix, ours: Measure.median(downloads.map(\.ours)),
                reference: Measure.median(downloads.map(\.bare)), unit: "MB/s", higherIsBetter: true, n: size),
        ]
    }

    /// The seconds of a bare upload of `data`: one PUT, answered 201.
    private static func barePut(_ data: Data, to url: URL, _ transport: any HTTPTransport) async throws -> Double {
        try await Measure.seconds {
            let reply = try await transport.send(
                HTTPRequestData(
                    method: "PUT", url: url,
                    headers: ["ZUMO-API-VERSION": "2.0.0", "Content-Type": "application/octet-stream"],
                    body: data, timeout: .seconds(600)))
            guard reply.status == 201 else { throw BenchError("the bare PUT answered \(reply.status)") }
        }
    }

    /// The seconds of a bare download of `size` bytes: one GET, the file kept as ours is (written, and synced before
    /// it is used) at `saved`, removed after.
    private static func bareGet(_ url: URL, size: Int, _ transport: any HTTPTransport, into saved: URL) async throws
        -> Double
    {
        defer { try? FileManager.default.removeItem(at: saved) }
        return try await Measure.seconds {
            let reply = try await transport.send(
                HTTPRequestData(method: "GET", url: url, headers: ["ZUMO-API-VERSION": "2.0.0"], timeout: .seconds(600))
            )
            guard reply.status == 200, reply.body.count == size else {
                throw BenchError("the bare GET answered \(reply.status), \(reply.body.count) bytes")
            }
            guard FileManager.default.createFile(atPath: saved.path, contents: nil) else {
                throw BenchError("cannot create \(saved.path)")
            }
            let handle = try FileHandle(forWritingTo: saved)
            try handle.write(contentsOf: reply.body)
            try handle.synchronize()
            try handle.close()
        }
    }

    /// `attachments.resume`: the reply of the part that crosses 90 % of the file is lost (the server kept the part);
    /// the push tries again and goes on. The figure is the share of the file's bytes sent twice, in %, beside the
    /// target (10 %).
    func attachmentResume() async throws -> BenchResult {
        let size = attachmentSize
        var shares: [Double] = []
        for run in 0..<repetitions {
            let share = try await BenchServer.run(.sqlite(path: path("attachments-resume")), attachments: true) {
                server in
                let file = try Self.writeFile(size: size, seed: UInt64(2_000 + run), in: directory)
                defer { try? FileManager.default.removeItem(at: file) }
                let transport = LosingTransport(inner: Self.transport(named: transport), fileSize: size)
                var configuration = SyncClient.Configuration()
                configuration.transport = transport
                configuration.protocol = dialect
                let phone = SyncClient(
                    url: server.url, store: try SQLiteLocalStore(path: path("attachments-resume")),
                    configuration: configuration)
                let table = try phone.syncTable("TodoItem", of: JSONValue.self)
                try await table.insert(["id": "with-file", "text": "A photo", "complete": false])
                try await table.attach(contentsOf: file, to: try ItemID("with-file"), field: "file")
                try await phone.push()
                guard transport.lost.withLock({ $0 }) else { throw BenchError("no reply was lost") }
                return Double(transport.sent.withLock { $0 } - size) / Double(size) * 100
            }
            shares.append(share)
        }
        return BenchResult(
            name: "attachments.resume", ours: Measure.median(shares), reference: 10, unit: "% resent",
            higherIsBetter: false, n: size)
    }

    /// `attachments.memory`: how much the peak resident memory of a separate client process grows while it attaches
    /// a 1 GB file (256 MB with `--quick`), uploads it, and downloads it into a second store — beside the target,
    /// 50 MB; `attachments.memory.peak`: its peak (the process, this whole binary, holds about 40 MB before any file
    /// moves).
    func attachmentMemory() async throws -> [BenchResult] {
        let size = quick ? 256_000_000 : 1_000_000_000
        let megabytes = try await BenchServer.run(.sqlite(path: path("attachments-memory")), attachments: true) {
            server in
            let printed = try await Self.runChild(
                ["--attachment-child", server.url.absoluteString, "--rows", String(size), "--transport", transport])
            let figures = printed?.split(separator: " ").compactMap { Double($0) } ?? []
            guard figures.count == 2 else { throw BenchError("the attachment child failed") }
            return (before: figures[0], peak: figures[1])
        }
        return [
            BenchResult(
                name: "attachments.memory", ours: megabytes.peak - megabytes.before, reference: 50, unit: "MB",
                higherIsBetter: false, n: size),
            BenchResult(
                name: "attachments.memory.peak", ours: megabytes.peak, reference: nil, unit: "MB",
                higherIsBetter: false, n: size),
        ]
    }

    /// In the child: write a file of `size` bytes, attach it, push it, download it into another store, check it;
    /// print the peak RSS in MB before the SDK moved it and after.
    static func attachmentChild(url: URL, size: Int, transport: String, directory: URL) async throws {
        let file = try writeFile(size: size, seed: 3_000, in: directory)
        var configuration = SyncClient.Configuration()
        configuration.transport = Self.transport(named: transport)
        configuration.attachmentCacheLimit = 2 * size
        func client(_ name: String) throws -> SyncClient {
            SyncClient(
                url: url, store: try SQLiteLocalStore(path: directory.appendingPathComponent(name).path),
                configuration: configuration)
        }
        let before = megabytes("VmHWM")
        let phone = try client("phone.sqlite")
        let table = try phone.syncTable("TodoItem", of: JSONValue.self)
        let id = try ItemID(UUID().uuidString)
        try await table.insert(["id": .string(id.rawValue), "text": "A film", "complete": false])
        let attachment = try await table.attach(contentsOf: file, to: id, field: "file")
        try FileManager.default.removeItem(at: file)
        try await phone.push()
        let tablet = try client("tablet.sqlite")
        let theirs = try tablet.syncTable("TodoItem", of: JSONValue.self)
        try await theirs.pull()
        guard let local = try await theirs.file(for: id, field: "file"),
            fileSize(local) == attachment.size
        else { throw BenchError("the 1 GB download is not whole") }
        print(String(format: "%.1f %.1f", before, megabytes("VmHWM")))
    }

    /// Writes `size` bytes of a seeded generator to a new file, in 1 MB pieces.
    static func writeFile(size: Int, seed: UInt64, in directory: URL) throws -> URL {
        let url = directory.appendingPathComponent("file-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw BenchError("cannot create \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var written = 0
        while written < size {
            let count = min(1 << 20, size - written)
            var piece = [UInt64](repeating: 0, count: (count + 7) / 8)
            for index in piece.indices {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                piece[index] = state
            }
            try handle.write(contentsOf: piece.withUnsafeBytes { Data($0.prefix(count)) })
            written += count
        }
        return url
    }

    static func fileSize(_ url: URL) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue
    }

    static func sha256(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}

/// A transport that counts the bytes of attachment parts sent and loses the reply of the part that crosses 90 % of
/// the file (once).
final class LosingTransport: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind locks.
    let inner: any HTTPTransport
    let fileSize: Int
    let sent = Locked(0)
    let lost = Locked(false)

    init(inner: any HTTPTransport, fileSize: Int) {
        self.inner = inner
        self.fileSize = fileSize
    }

    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        let isPart = request.method == "PUT" && request.url.path.contains("/attachments/")
        if isPart { sent.withLock { $0 += request.body?.count ?? 0 } }
        let response = try await inner.send(request)
        if isPart, let range = request.headers["Content-Range"], Self.crosses(range, at: fileSize * 9 / 10),
            lost.withLock({ lost in
                defer { lost = true }; return !lost
            })
        {
            throw TransportError(.connectionLost, host: request.url.host ?? "")
        }
        return response
    }

    /// Whether the part `bytes A-B/N` holds byte `offset`.
    static func crosses(_ range: String, at offset: Int) -> Bool {
        let bounds = range.dropFirst("bytes ".count).split(separator: "/")[0].split(separator: "-").compactMap {
            Int($0)
        }
        return bounds.count == 2 && bounds[0] <= offset && offset <= bounds[1]
    }
}
