import Foundation
import SyncCore
import TestSupport
import Testing

/// The release binaries run as an operator deploys them (issue 64): copied into an empty folder elsewhere, with the
/// build folder out of reach. Before, both stopped at start with "could not load resource bundle": SwiftPM's
/// accessor looked for the bundle beside the copy, then in the build folder, and crashed when neither had it.
@Suite(.timeLimit(.minutes(3))) struct DeploymentTests {
    /// A copy of `product` in an empty folder, run where the build folder is an empty tmpfs (a mount namespace of its
    /// own, `unshare`), serves what it used to read from resources: `sync-server` its console, both OpenAPI documents
    /// and a write in each dialect; `e2e-server` its seeded movies.
    @Test(arguments: ["sync-server", "e2e-server"]) func aCopiedBinaryRunsWithoutItsBuildFolder(_ product: String)
        async throws
    {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let copy = folder.appendingPathComponent(product).path
        try FileManager.default.copyItem(atPath: Products.path(product), toPath: copy)
        let port = try freePort()
        let script = #"mount -t tmpfs none "$1" && exec "$2" --port "$3" --database "sqlite:$4""#
        let process = await RunningProcess(
            "/usr/bin/unshare",
            [
                "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", Products.directory.path, copy,
                String(port), folder.appendingPathComponent("data.sqlite").path,
            ])
        do {
            try await serves(product, process, port: port)
        } catch {
            await process.stop()
            throw error
        }
        await process.stop()
    }

    func serves(_ product: String, _ process: RunningProcess, port: Int) async throws {
        let listening = await process.waitForOutput(containing: "listening on", within: .seconds(60))
        #expect(listening, "\(product) did not start: \(process.printed)")
        guard listening else { return }
        func get(_ path: String, version: String = "2.0.0") async throws -> RawReply {
            try await RawConnection.exchange(
                port: port,
                "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: \(version)\r\nConnection: close\r\n\r\n")
        }
        if product == "e2e-server" {
            let movie = try await get("/tables/movies?$filter=id%20eq%20'Movie%20000'")
            #expect(movie.status == 200)
            #expect(movie.json?.arrayValue?.count == 1, "\(movie)")
            return
        }
        let console = try await get("/console")
        #expect(console.status == 200)
        #expect(console.text.contains("<script src="), "\(console)")
        for document in ["/openapi.yaml", "/openapi-v3.yaml"] {
            let reply = try await get(document)
            #expect(reply.status == 200)
            #expect(reply.text.contains("openapi: 3.1.0"), "\(document): \(reply)")
        }
        for (version, id) in [("2.0.0", "v2"), ("3.0.0", "v3")] {
            let body = #"{"id":"\#(id)","text":"copied"}"#
            let reply = try await RawConnection.exchange(
                port: port,
                "POST /tables/TodoItem HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: \(version)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                    + body)
            #expect(reply.status == 201, "\(version): \(reply)")
        }
    }

    /// `serve` takes its options from `SYNC_SERVER_*` variables (the port, the host, a flag, a limit), the command line
    /// winning over them, and `--log-format json` logs one JSON object per line, the `listening on` line among them.
    @Test func takesItsOptionsFromTheEnvironmentAndLogsJSONLines() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("env-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = try freePort()
        let process = await RunningProcess(
            Products.path("sync-server"), ["--max-body-size", "200"],
            environment: [
                "SYNC_SERVER_PORT": String(port), "SYNC_SERVER_HOST": "127.0.0.1", "SYNC_SERVER_NO_BATCH": "true",
                "SYNC_SERVER_LOG_FORMAT": "json", "SYNC_SERVER_LOG_LEVEL": "debug",
                "SYNC_SERVER_MAX_BODY_SIZE": "100000",
                "DATABASE_URL": "sqlite:" + folder.appendingPathComponent("data.sqlite").path,
            ])
        do {
            #expect(
                await process.waitForOutput(containing: "listening on http://127.0.0.1:\(port)", within: .seconds(60)))
            func post(_ path: String, _ body: String) async throws -> RawReply {
                try await RawConnection.exchange(
                    port: port,
                    "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nZUMO-API-VERSION: 2.0.0\r\n"
                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                        + body)
            }
            #expect(try await post("/tables/TodoItem", #"{"id":"a"}"#).status == 201)
            #expect(try await post("/batch", #"{"requests":[]}"#).status == 404)  // SYNC_SERVER_NO_BATCH
            let large = #"{"id":"b","text":"\#(String(repeating: "x", count: 300))"}"#
            #expect(try await post("/tables/TodoItem", large).status == 413)  // the command line's 200 bytes won
        } catch {
            await process.stop()
            throw error
        }
        await process.stop()
        let lines = process.printed.split(separator: "\n")
        #expect(lines.count >= 3, "\(process.printed)")  // the start, the listening line, a request at debug
        for line in lines {
            let object = try? JSONValue(parsing: Data(line.utf8)).objectValue
            #expect(object?["time"] != nil && object?["level"] != nil && object?["message"] != nil, "\(line)")
        }
        #expect(lines.contains { $0.contains(#""message":"listening on http://127.0.0.1:\#(port)""#) })
    }

    /// A `SYNC_SERVER_*` variable that is no option, or whose value the option refuses, stops the start with a
    /// message naming the variable.
    @Test(arguments: [
        ("SYNC_SERVER_PORTT", "1", "$SYNC_SERVER_PORTT (--portt)"), ("SYNC_SERVER_PORT", "eighty", "$SYNC_SERVER_PORT"),
        ("SYNC_SERVER_NO_BATCH", "maybe", "$SYNC_SERVER_NO_BATCH is a flag: true or false"),
    ])
    func aWrongVariableIsNamed(_ variable: String, _ value: String, _ expected: String) async throws {
        let result = try await runCommand(
            Products.path("sync-server"), ["--database", "sqlite::memory:"], environment: [variable: value],
            timeout: .seconds(60))
        #expect(result.status != 0)
        #expect(result.error.contains(expected), "\(result.error)")
    }

    /// `sync-server probe` (the image's HEALTHCHECK) exits 0 while the server on the port answers `/ready` with 200,
    /// and 1 with the reason when nothing listens there or the path answers otherwise.
    @Test func theProbeTellsWhetherTheServerIsReady() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = try freePort()
        try await withServerProcess(port: port, database: "sqlite:" + folder.appendingPathComponent("p.sqlite").path) {
            _ in
            let ready = try await runCommand(
                Products.path("sync-server"), ["probe"], environment: ["SYNC_SERVER_PORT": String(port)])
            #expect(ready.status == 0, "\(ready.error)")
            let missing = try await runCommand(
                Products.path("sync-server"), ["probe", "--port", String(port), "--path", "/nothing-here"])
            #expect(missing.status == 1)
            #expect(missing.error.contains("/nothing-here answered 404"), "\(missing.error)")
        }
        let closed = try await runCommand(Products.path("sync-server"), ["probe", "--port", String(port)])
        #expect(closed.status == 1)
        #expect(closed.error.contains("cannot connect to 127.0.0.1:\(port)"), "\(closed.error)")
    }
}
