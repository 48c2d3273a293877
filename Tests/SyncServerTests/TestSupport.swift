import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncCore

@testable import SyncServer

/// A response, with its body parsed as JSON when it is JSON.
struct Reply: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let text: String

    var json: JSONValue? { try? JSONValue(parsing: text) }
    var items: [JSONValue] { json?.arrayValue ?? json?["results"]?.arrayValue ?? [] }
    var ids: [String] { items.compactMap { $0["id"]?.stringValue } }
    var error: String? { json?["error"]?.stringValue }
    subscript(header: String) -> String? { headers[HTTPField.Name(header)!] }
}

extension TestClientProtocol {
    /// Sends a request with `ZUMO-API-VERSION: 2.0.0` (unless `versioned` is false) and a JSON body.
    func send(
        _ method: HTTPRequest.Method, _ uri: String, json: JSONValue? = nil, body: String? = nil,
        headers: HTTPFields = [:], versioned: Bool = true
    ) async throws -> Reply {
        var headers = headers
        if versioned { headers[HTTPField.Name("ZUMO-API-VERSION")!] = "2.0.0" }
        var buffer: ByteBuffer?
        if let text = json?.serialized() ?? body {
            headers[.contentType] = "application/json"
            buffer = ByteBuffer(string: text)
        }
        return try await execute(uri: uri, method: method, headers: headers, body: buffer) { response in
            Reply(status: response.status, headers: response.headers, text: String(buffer: response.body))
        }
    }
}

/// A directory that lives for one test.
struct TemporaryDirectory: ~Copyable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("offlinesync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var databasePath: String { url.appendingPathComponent("sync.sqlite").path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

enum Fixture {
    /// A configuration on a fresh SQLite file, listening on 127.0.0.1, any port.
    static func configuration(_ directory: borrowing TemporaryDirectory, tables: [TableConfiguration] = [])
        -> SyncServerConfiguration
    {
        var configuration = SyncServerConfiguration()
        configuration.port = 0
        configuration.database = .sqlite(path: directory.databasePath)
        configuration.tables = tables
        return configuration
    }

    /// Runs `body` against a server on a fresh SQLite file.
    static func withServer<T: Sendable>(
        tables: [TableConfiguration] = [], setup: TestingSetup = .router,
        configure: (inout SyncServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let directory = try TemporaryDirectory()
        var configuration = configuration(directory, tables: tables)
        configure(&configuration)
        let app = try await buildApplication(configuration)
        return try await app.test(setup, body)
    }

    static func table(
        _ name: String, softDelete: Bool = true, pageSize: Int = 50, maxTop: Int = 1000,
        columns: [String: SQLColumnType]? = nil
    ) -> TableConfiguration {
        // Test tables are well-formed by construction.
        try! TableConfiguration(
            name: name, softDelete: softDelete, pageSize: pageSize, maxTop: maxTop, columns: columns)
    }
}
