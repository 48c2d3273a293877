import AsyncHTTPClient
import Foundation
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import SyncCore
import Testing

@testable import SyncServer

/// Every kind of answer arrives whole, whatever its size and whatever the client asks of compression (issue 28,
/// point 1), over real sockets, on both stores and in both dialects.
///
/// Responses of 1 KB, 64 KB, 300 KB and 1 MB, and pages past the page byte bound (8 MiB), to a client that sends no
/// `Accept-Encoding` (curl, Python's `http.client`, .NET's `HttpClient` as it comes), one that asks for gzip and one
/// that asks for deflate, in turn, over a pooled keep-alive connection and, every fourth request, a fresh one. The
/// answers: an item, a page (v2 array, v2 `{results,count}`, v3 `{items,count}`), a write's echo (POST, PATCH, PUT,
/// DELETE), `/batch`, `/changes`, the console's rows, and errors (409 and 412 with the server's item, 410, 400).
/// Each size class below 8 MiB is asked for 18 times in each encoding (a round of 18 answers), the pages past 8 MiB
/// 3 times in each; `.ci/soak` adds the volume (hundreds of requests of each size class, and pages past 8 MiB, in
/// every encoding, on both stores), on a machine it has to itself. Before the fix in
/// `WholeResponseFlusher`, an uncompressed answer larger than the channel's high-water mark (64 KiB) was sometimes
/// never finished: about one 300 KB item in ten, and most large write echoes.
@Suite(.timeLimit(.minutes(3))) struct ResponseSizeTests {
    /// The bodies' sizes: each row's `text` has this many characters.
    static let sizes = [1_000, 64_000, 300_000, 1_000_000]
    /// Rounds per size class; round `r` asks in encoding `r % 3`.
    static let rounds = 3
    /// Rounds of the pages past 8 MiB.
    static let bigRounds = 3
    /// No `Accept-Encoding`, gzip, deflate.
    static let encodings: [String?] = [nil, "gzip", "deflate"]

    /// The server's clients, as other programs would be: AsyncHTTPClient, one that asks for no compression and
    /// takes none (its decompressor would ask for both), and one that decompresses what it asked for.
    struct Caller {
        let plain: HTTPClient
        let decoding: HTTPClient
        let base: String
        var sent = 0
        var perEncoding: [String: Int] = [:]

        /// Sends `method` to `path` and checks that the whole answer came: its status, its encoding (compressed
        /// exactly when asked for and large enough) and, where `expectedText` is given, that it is larger than a
        /// row's text of that many characters. Returns the body's bytes.
        @discardableResult
        mutating func call(
            _ method: HTTPMethod, _ path: String, version: String = "2.0.0", body: JSONValue? = nil,
            headers: [(String, String)] = [], encoding: String?, status: Int, expectedText: Int? = nil
        ) async throws -> ByteBuffer {
            sent += 1
            perEncoding[encoding ?? "plain", default: 0] += 1
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            request.headers.add(name: "ZUMO-API-VERSION", value: version)
            if let encoding { request.headers.add(name: "Accept-Encoding", value: encoding) }
            if sent % 4 == 0 { request.headers.add(name: "Connection", value: "close") }
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body.serializedData()))
            }
            let label = "\(method) \(path.prefix(80)) \(encoding ?? "plain")"
            let response = try await (encoding == nil ? plain : decoding).execute(request, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: 64 << 20)
            #expect(Int(response.status.code) == status, "\(label): \(String(buffer: bytes).prefix(200))")
            let coding = response.headers.first(name: "Content-Encoding")
            if encoding == nil || bytes.readableBytes >= 1024 {
                #expect(coding == encoding, "\(label): \(bytes.readableBytes) bytes")
            }
            // Framing and integrity are the HTTP client's to check (Content-Length or chunks, the gzip and zlib
            // checksums): a cut answer is an error. What is left is that the row is in it.
            if let expectedText {
                #expect(bytes.readableBytes > expectedText, "\(label): \(bytes.readableBytes) bytes")
            }
            return bytes
        }
    }

    @Test(arguments: Backend.all) func everyAnswerOfEverySizeArrivesWholeInEveryEncoding(_ backend: Backend)
        async throws
    {
        try await Fixture.withServer(backend, tables: [Fixture.table("Items")], setup: .live) { client in
            let port = try #require(client.port)
            let timeout = HTTPClient.Configuration.Timeout(connect: .seconds(5), read: .seconds(30))
            let plain = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(timeout: timeout))
            let decoding = HTTPClient(
                eventLoopGroupProvider: .singleton,
                configuration: .init(timeout: timeout, decompression: .enabled(limit: .none)))
            var caller = Caller(plain: plain, decoding: decoding, base: "http://127.0.0.1:\(port)")
            do {
                try await askEverything(&caller)
            } catch {
                try? await plain.shutdown()
                try? await decoding.shutdown()
                throw error
            }
            try await plain.shutdown()
            try await decoding.shutdown()
        }
    }

    private func askEverything(_ caller: inout Caller) async throws {
        // The rows read back: one of each size, and nine of 1 MB for a page past the 8 MiB bound.
        for size in Self.sizes {
            let row: JSONValue = ["id": .string("page-\(size)"), "text": .string(String(repeating: "p", count: size))]
            try await caller.call(.POST, "/tables/Items", body: row, encoding: nil, status: 201)
        }
        for index in 0..<9 {
            let text = String(repeating: "b", count: 1_000_000)
            try await caller.call(
                .POST, "/tables/Items", body: ["id": .string("big-\(index)"), "text": .string(text)], encoding: nil,
                status: 201)
        }
        var perSize: [String: Int] = [:]
        for size in Self.sizes {
            let before = caller.sent
            for round in 0..<Self.rounds {
                try await askRound(&caller, size: size, round: round)
            }
            perSize["\(size)"] = caller.sent - before
        }
        // Pages of nine rows of 1 MB: past the page byte bound, which ends a page after the row that passes it. Every
        // answer of a kind must have the same length.
        let before = caller.sent
        let bigPage = "$filter=startswith(id,'big-')&$top=9"
        var lengths: [Int: Int] = [:]
        for round in 0..<Self.bigRounds {
            let encoding = Self.encodings[round % 3]
            let asks: [(path: String, version: String)] = [
                ("/tables/Items?\(bigPage)", "2.0.0"), ("/tables/Items?\(bigPage)&$count=true", "3.0.0"),
                ("/console/api/tables/Items?$filter=startswith(id,'big-')", "2.0.0"),
            ]
            for (kind, ask) in asks.enumerated() {
                let bytes = try await caller.call(
                    .GET, ask.path, version: ask.version, encoding: encoding, status: 200)
                #expect(bytes.readableBytes > 8 << 20)
                #expect(bytes.readableBytes == lengths[kind, default: bytes.readableBytes], "\(ask.path)")
                lengths[kind] = bytes.readableBytes
            }
        }
        perSize["8 MiB pages"] = caller.sent - before
        print("ResponseSizeTests: \(caller.sent) requests, \(caller.perEncoding); per size class \(perSize)")
        #expect(perSize.count == 5)
        #expect(perSize.filter { $0.key != "8 MiB pages" }.values.allSatisfy { $0 == 54 }, "\(perSize)")
    }
    /// One round of every answer for rows of `size`, in the round's encoding.
    private func askRound(_ caller: inout Caller, size: Int, round: Int) async throws {
        let encoding = Self.encodings[round % 3]
        let text = String(repeating: "x", count: size)
        let other = String(repeating: "y", count: size)
        let page = "page-\(size)"

        // Reads, v2 and v3.
        try await caller.call(.GET, "/tables/Items/\(page)", encoding: encoding, status: 200, expectedText: size)
        try await caller.call(
            .GET, "/tables/Items?$filter=id%20eq%20'\(page)'\(round % 2 == 0 ? "&$inlinecount=allpages" : "")",
            encoding: encoding, status: 200, expectedText: size)
        try await caller.call(
            .GET, "/tables/Items/\(page)", version: "3.0.0", encoding: encoding, status: 200, expectedText: size)
        try await caller.call(
            .GET, "/tables/Items?$filter=id%20eq%20'\(page)'&$count=true", version: "3.0.0", encoding: encoding,
            status: 200, expectedText: size)
        try await caller.call(
            .GET, "/console/api/tables/Items?$filter=id%20eq%20'\(page)'", encoding: encoding, status: 200)

        // v2 writes: create, a conflicting create (409 with the stored row), update, a stale update (412), delete.
        let id = "v2-\(size)-\(round)"
        let created = try await caller.call(
            .POST, "/tables/Items", body: ["id": .string(id), "text": .string(text)], encoding: encoding, status: 201,
            expectedText: size)
        let version = try #require(try JSONValue(parsing: Data(created.readableBytesView))["version"]?.stringValue)
        try await caller.call(
            .POST, "/tables/Items", body: ["id": .string(id), "text": .string(other)], encoding: encoding, status: 409,
            expectedText: size)
        try await caller.call(
            .PATCH, "/tables/Items/\(id)", body: ["text": .string(other)], encoding: encoding, status: 200,
            expectedText: size)
        try await caller.call(
            .PATCH, "/tables/Items/\(id)", body: ["text": .string(text)], headers: [("If-Match", "\"\(version)\"")],
            encoding: encoding, status: 412, expectedText: size)
        try await caller.call(.DELETE, "/tables/Items/\(id)", encoding: encoding, status: 200, expectedText: size)

        // v3 writes: create, replace, a stale replace (412 with the stored row), delete (204), then a 410.
        let v3 = "v3-\(size)-\(round)"
        let made = try await caller.call(
            .POST, "/tables/Items", version: "3.0.0", body: ["id": .string(v3), "text": .string(text)],
            encoding: encoding, status: 201, expectedText: size)
        let madeVersion = try #require(try JSONValue(parsing: Data(made.readableBytesView))["version"]?.stringValue)
        try await caller.call(
            .PUT, "/tables/Items/\(v3)", version: "3.0.0", body: ["id": .string(v3), "text": .string(other)],
            encoding: encoding, status: 200, expectedText: size)
        try await caller.call(
            .PUT, "/tables/Items/\(v3)", version: "3.0.0", body: ["id": .string(v3), "text": .string(text)],
            headers: [("If-Match", "\"\(madeVersion)\"")], encoding: encoding, status: 412, expectedText: size)
        try await caller.call(.DELETE, "/tables/Items/\(v3)", version: "3.0.0", encoding: encoding, status: 204)
        try await caller.call(.GET, "/tables/Items/\(v3)", version: "3.0.0", encoding: encoding, status: 410)

        // A batch whose answer holds two echoes of the row, the change feed, and a refused query.
        let batched = "batch-\(size)-\(round)"
        let batch: JSONValue = [
            "requests": [
                ["method": "POST", "url": "tables/Items", "body": ["id": .string(batched), "text": .string(text)]],
                ["method": "DELETE", "url": .string("tables/Items/\(batched)")],
            ]
        ]
        try await caller.call(.POST, "/batch", body: batch, encoding: encoding, status: 200, expectedText: size)
        try await caller.call(.GET, "/changes?tables=Items&wait=0", encoding: encoding, status: 200)
        try await caller.call(.GET, "/tables/Items?$filter=text%20eq", encoding: encoding, status: 400)
    }
}
