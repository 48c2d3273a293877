import Foundation
import GRDB
import Hummingbird
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Cases {
    /// `server.page.large` and `server.page.large.gzip`: pages of ten 100 KB rows (about 1 MB) at 8 connections,
    /// from a server that compresses as it does by default, to a client that asks for no compression
    /// (`identity`) or for gzip; the reference is a bare Hummingbird route writing the same bytes uncompressed.
    /// In MB of page (uncompressed) per second, so that the price of a megabyte — and of compressing it — is on
    /// record.
    func serverPageLarge(gzip: Bool) async throws -> BenchResult {
        let serverPath = path(gzip ? "large-gzip" : "large")
        try await Self.seedLargeRows(path: serverPath, rows: 40, size: 100_000)
        let requests = quick ? 160 : 640
        let encoding = gzip ? "gzip" : "identity"
        let (ours, pageBytes) = try await BenchServer.run(.sqlite(path: serverPath), compressing: true) { server in
            let url = URL(string: server.url.absoluteString + "/tables/TodoItem?$top=10")!
            var request = URLRequest(url: url)
            request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
            let page = try await URLSession.shared.data(for: request).0
            var runs: [Double] = []
            for _ in 0..<repetitions {
                runs.append(
                    try await load(
                        url, requests: requests, connections: 8,
                        headers: ["ZUMO-API-VERSION": "2.0.0", "Accept-Encoding": encoding]))
            }
            return (Measure.median(runs), page)
        }
        let router = Router()
        router.get("page") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: pageBytes)))
        }
        let reference = try await BareServer.run(router) { url in
            var runs: [Double] = []
            for _ in 0..<repetitions {
                runs.append(
                    try await load(
                        url.appendingPathComponent("page"), requests: requests, connections: 8,
                        headers: ["Accept-Encoding": "identity"]))
            }
            return Measure.median(runs)
        }
        let megabytes = Double(pageBytes.count) / 1_000_000
        return BenchResult(
            name: gzip ? "server.page.large.gzip" : "server.page.large", ours: ours * megabytes,
            reference: reference * megabytes, unit: "MB/s", higherIsBetter: true, n: requests)
    }

    /// A server file with `rows` TodoItem rows whose text is `size` bytes of words (compressing about as prose
    /// does, not as one repeated letter would).
    static func seedLargeRows(path: String, rows: Int, size: Int) async throws {
        try await BenchServer.seed(path: path, rows: 0)
        let words = ["inspection", "valve", "north", "pressure", "ok", "replaced", "gasket", "site", "42", "photo"]
        let database = try DatabaseQueue(path: path)
        try await database.write { db in
            let statement = try db.makeStatement(
                sql: "INSERT INTO todoitem (id, createdAt, updatedAt, version, deleted, text, complete) "
                    + "VALUES (?, ?, ?, ?, 0, ?, 0)")
            var state: UInt64 = 0x2545_F491_4F6C_DD1D
            for index in 0..<rows {
                var text = ""
                text.reserveCapacity(size + 16)
                while text.utf8.count < size {
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    text += words[Int(state >> 60) % words.count] + " "
                }
                let stamp = Int64(1_700_000_000_000 + index)
                try statement.execute(arguments: [String(format: "large-%04d", index), stamp, stamp, "v\(stamp)", text])
            }
        }
    }
}
