import Foundation
import GRDB
import Hummingbird
import Logging
import OfflineSync
import SyncOData
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Cases {
    /// Sends `requests` GETs of `url` from `connections` concurrent workers; returns requests per second.
    func load(_ url: URL, requests: Int, connections: Int, headers: [String: String] = [:]) async throws -> Double {
        try await Self.load(requests: requests, connections: connections, expecting: 200) { _, _ in
            var request = URLRequest(url: url)
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            return request
        }
    }

    /// Sends `requests` requests, `make(worker, index)` each, from `connections` concurrent workers, each
    /// answered `status`; returns requests per second.
    static func load(
        requests: Int, connections: Int, expecting status: Int,
        _ make: @escaping @Sendable (_ worker: Int, _ index: Int) -> URLRequest
    ) async throws -> Double {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = connections
        let session = URLSession(configuration: configuration)
        let perWorker = requests / connections
        let seconds = try await Measure.seconds {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<connections {
                    group.addTask {
                        for index in 0..<perWorker {
                            let request = make(worker, index)
                            let (_, response) = try await session.data(for: request)
                            guard (response as? HTTPURLResponse)?.statusCode == status else {
                                throw BenchError("\(request.httpMethod ?? "GET") \(request.url?.path ?? "") failed")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        return Double(perWorker * connections) / seconds
    }

    /// `server.page`: filtered 50-row pages at 16 connections, against a bare Hummingbird route that
    /// returns the same 50 items from memory (uncompressed, as both were before compression); with
    /// `compressing`, `server.page.gzip`: the same with the server's default compression (the pages are about
    /// 7 KB, and the client accepts gzip), against the same reference — the CPU price of compression per request.
    /// `server.write.hook`: inserts from 16 concurrent connections into a server on SQLite whose table has an insert
    /// hook that does nothing, against the same load with no hook, the two in turn (each first every other run). The
    /// ratio is what running a hook costs (its target: 0.95 or more). `server.write.aftercommit` (and `.pg`, on
    /// `--database`): the same with an after-commit hook that does nothing — each write also records itself in the
    /// outbox, and the delivery service drains it during the load.
    func serverWriteHook(
        _ name: String = "server.write.hook", hooks: TableHooks = TableHooks(beforeInsert: { _ in }),
        database: DatabaseLocation? = nil
    ) async throws -> BenchResult {
        let writes = quick ? 2000 : 8000
        var ours: [Double] = []
        var reference: [Double] = []
        for run in 0..<repetitions {
            for hooked in run.isMultiple(of: 2) ? [false, true] : [true, false] {
                if case .postgres(let url)? = database { try await Self.resetPostgres(url) }
                let rate = try await BenchServer.run(
                    database ?? .sqlite(path: path("write-\(run)-\(hooked)")), hooks: hooked ? hooks : nil
                ) { server in
                    try await Self.insertLoad(server.url, writes: writes, connections: 16, prefix: "h\(run)")
                }
                if hooked { ours.append(rate) } else { reference.append(rate) }
            }
        }
        return BenchResult(
            name: name, ours: Measure.median(ours), reference: Measure.median(reference),
            unit: "writes/s", higherIsBetter: true, n: writes)
    }

    /// No-op after-commit hooks, for `server.write.aftercommit`.
    static let afterCommitHooks = TableHooks(afterCommit: { _ in })

    func serverPage(rows: Int, compressing: Bool = false) async throws -> BenchResult {
        let serverPath = path("page")
        try await BenchServer.seed(path: serverPath, rows: rows)
        return try await serverPage(
            name: compressing ? "server.page.gzip" : "server.page", database: .sqlite(path: serverPath),
            compressing: compressing)
    }

    /// `server.page` on a seeded `database` (its shared tables, with `shared`; `headers` added to every request).
    func serverPage(
        name: String, database: DatabaseLocation, compressing: Bool = false, shared: Bool = false,
        headers: [String: String] = [:]
    ) async throws -> BenchResult {
        let requests = quick ? 800 : 3200
        let filter = ODataQuery.percentEncode("complete eq false and startswith(text,'Task')")
        let ours = try await BenchServer.run(database, shared: shared, compressing: compressing) { server in
            let url = URL(string: server.url.absoluteString + "/tables/TodoItem?$filter=\(filter)&$top=50")!
            var runs: [Double] = []
            for _ in 0..<repetitions {
                runs.append(
                    try await load(
                        url, requests: requests, connections: 16,
                        headers: headers.merging(["ZUMO-API-VERSION": "2.0.0"]) { $1 }))
            }
            return Measure.median(runs)
        }
        if shared {
            return BenchResult(name: name, ours: ours, reference: nil, unit: "req/s", higherIsBetter: true, n: requests)
        }
        // The reference: the same 50 items, from memory, on a bare route.
        let page = try await BenchServer.run(database, compressing: false) { server in
            var request = URLRequest(
                url: URL(string: server.url.absoluteString + "/tables/TodoItem?$filter=\(filter)&$top=50")!)
            request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
            return try await URLSession.shared.data(for: request).0
        }
        let router = Router()
        router.get("page") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: page)))
        }
        let reference = try await BareServer.run(router) { url in
            var runs: [Double] = []
            for _ in 0..<repetitions {
                runs.append(try await load(url.appendingPathComponent("page"), requests: requests, connections: 16))
            }
            return Measure.median(runs)
        }
        return BenchResult(
            name: name, ours: ours, reference: reference, unit: "req/s", higherIsBetter: true, n: requests)
    }

    /// `push.sequential`: pushing queued inserts against sequential POSTs of the same bodies to a bare
    /// Hummingbird route that writes one row.
    func pushSequential() async throws -> BenchResult {
        let count = quick ? 1000 : 5000
        let serverPath = path("push")
        try await BenchServer.seed(path: serverPath, rows: 0)
        let ours = try await BenchServer.run(path: serverPath) { server in
            var runs: [Double] = []
            for run in 0..<repetitions {
                let client = try await client(server.url, store: "pushclient", batchPush: .never)
                try await client.syncTable("TodoItem", of: BenchItem.self).insert(
                    contentsOf: (0..<count).map {
                        BenchItem(id: "p\(run)-\($0)", text: "Task \($0)", complete: false)
                    })
                var result: PushResult?
                runs.append(Double(count) / (try await Measure.seconds { result = try await client.push() }))
                guard result?.pushedCount == count else {
                    throw BenchError("push.sequential pushed \(result?.pushedCount ?? 0) of \(count)")
                }
            }
            return Measure.median(runs)
        }
        let database = try DatabasePool(path: path("barepush"))
        try await database.write { db in
            try db.execute(sql: "CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, data TEXT NOT NULL)")
        }
        let router = Router()
        router.post("rows") { request, _ in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 20)
            let text = String(buffer: body)
            let id = UUID().uuidString
            try await database.write { db in try db.execute(sql: "INSERT INTO t VALUES (?, ?)", arguments: [id, text]) }
            return Response(
                status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        }
        let reference = try await BareServer.run(router) { url in
            var runs: [Double] = []
            let session = URLSession(configuration: .ephemeral)
            for run in 0..<repetitions {
                runs.append(
                    Double(count)
                        / (try await Measure.seconds {
                            for index in 0..<count {
                                var request = URLRequest(url: url.appendingPathComponent("rows"))
                                request.httpMethod = "POST"
                                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                                request.httpBody = Data(
                                    #"{"complete":false,"id":"p\#(run)-\#(index)","text":"Task \#(index)"}"#.utf8)
                                let (_, response) = try await session.data(for: request)
                                guard (response as? HTTPURLResponse)?.statusCode == 201 else {
                                    throw BenchError("bare POST failed")
                                }
                            }
                        }))
            }
            return Measure.median(runs)
        }
        return BenchResult(
            name: "push.sequential", ours: ours, reference: reference, unit: "ops/s", higherIsBetter: true, n: count)
    }
}

/// A bare Hummingbird server on 127.0.0.1 (any port), for references.
enum BareServer {
    static func run<T: Sendable>(_ router: Router<BasicRequestContext>, _ body: @Sendable (URL) async throws -> T)
        async throws -> T
    {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: Logger(label: "sync-bench", factory: { _ in SwiftLogNoOpLogHandler() }))
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await app.runService(gracefulShutdownSignals: []); return nil
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let result = try await body(URL(string: "http://127.0.0.1:\(port)")!)
            group.cancelAll()
            return result
        }
    }
}
