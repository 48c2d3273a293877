import Foundation
import HTTPTypes
import HummingbirdTesting
import SyncCore
import TestSupport
import Testing

@testable import SyncServer

/// Compressed responses (issue 17, point 3) over real sockets: which responses are compressed, for which
/// requests, and that their framing is right. Store-independent, so on SQLite only. (That a compressed page
/// decompresses to the rows is OfflineSyncTests.CompressionTests, through both transports.)
@Suite(.timeLimit(.minutes(3))) struct CompressionTests {
    /// One response read from raw bytes: its head's fields (names lowercased) and its body.
    struct Response {
        let status: Int?
        let fields: [String: String]
        let body: [UInt8]

        init(_ reply: RawReply) throws {
            let bytes = reply.bytes
            let end = try #require(bytes.indices.first { bytes[$0...].starts(with: Array("\r\n\r\n".utf8)) })
            let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
            status = reply.status
            var fields: [String: String] = [:]
            for line in head.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                    in: .whitespaces)
            }
            self.fields = fields
            body = Array(bytes[(end + 4)...])
        }

        /// The size gzip's trailer gives for the uncompressed body (ISIZE, RFC 1952).
        var gzipOriginalSize: Int? {
            guard body.count >= 18, body[0] == 0x1f, body[1] == 0x8b else { return nil }
            return body.suffix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
        }
    }

    /// Runs `body` with a server (compressing as `minimumSize` says) holding 30 rows, and a function that GETs
    /// a path with the given `Accept-Encoding`.
    func withRows(
        compressingFrom minimumSize: Int? = 1024,
        _ body: @Sendable (_ get: @Sendable (String, String?) async throws -> Response) async throws -> Void
    ) async throws {
        try await Fixture.withServer(.sqlite, setup: .live, configure: { $0.compressionMinimumSize = minimumSize }) {
            client in
            for index in 0..<30 {
                let row: JSONValue = ["id": .string("row-\(index)"), "text": .string("Item number \(index)")]
                _ = try await client.send(.post, "/tables/TodoItem", json: row)
            }
            let port = try #require(client.port)
            try await body { path, acceptEncoding in
                let accept = acceptEncoding.map { "Accept-Encoding: \($0)\r\n" } ?? ""
                return try Response(
                    await RawConnection.exchange(
                        port: port,
                        "GET \(path) HTTP/1.1\r\nHost: localhost\r\nZUMO-API-VERSION: 2.0.0\r\n\(accept)Connection: close\r\n\r\n"
                    ))
            }
        }
    }

    @Test func aPageIsGzippedForAClientThatAcceptsItWithItsCompressedLength() async throws {
        try await withRows { get in
            let plain = try await get("/tables/TodoItem", nil)
            #expect(plain.status == 200)
            #expect(plain.fields["content-encoding"] == nil)
            #expect(plain.fields["vary"] == "Accept-Encoding")
            #expect(plain.fields["content-length"] == "\(plain.body.count)")

            let zipped = try await get("/tables/TodoItem", "gzip")
            #expect(zipped.status == 200)
            #expect(zipped.fields["content-encoding"] == "gzip")
            #expect(zipped.fields["vary"] == "Accept-Encoding")
            // The length is the compressed body's: the uncompressed one would leave the client waiting.
            #expect(zipped.fields["content-length"] == "\(zipped.body.count)")
            #expect(zipped.gzipOriginalSize == plain.body.count)
            #expect(zipped.body.count * 3 < plain.body.count, "\(zipped.body.count) of \(plain.body.count) bytes")

            let preferred = try await get("/tables/TodoItem", "deflate;q=0.5, gzip;q=0.9")
            #expect(preferred.fields["content-encoding"] == "gzip")
            let deflated = try await get("/tables/TodoItem", "gzip;q=0.1, deflate")
            #expect(deflated.fields["content-encoding"] == "deflate")
        }
    }

    @Test func refusedEncodingsSmallBodiesAndATurnedOffServerAreSentAsTheyAre() async throws {
        try await withRows { get in
            let refused = try await get("/tables/TodoItem", "gzip;q=0, identity")
            #expect(refused.fields["content-encoding"] == nil)
            #expect(refused.status == 200)
            let unknown = try await get("/tables/TodoItem", "br")
            #expect(unknown.fields["content-encoding"] == nil)
            let small = try await get("/tables/TodoItem/row-1", "gzip")
            #expect(small.status == 200)
            #expect(small.body.count < 1024)
            #expect(small.fields["content-encoding"] == nil)
            #expect(small.fields["vary"] == nil)
            let missing = try await get("/tables/TodoItem/nothing", "gzip")
            #expect(missing.status == 404)
            #expect(missing.fields["content-encoding"] == nil)
        }
        try await withRows(compressingFrom: nil) { get in
            let page = try await get("/tables/TodoItem", "gzip")
            #expect(page.status == 200)
            #expect(page.fields["content-encoding"] == nil)
            #expect(page.fields["vary"] == nil)
            #expect(page.body.count > 1024)
        }
    }
}
