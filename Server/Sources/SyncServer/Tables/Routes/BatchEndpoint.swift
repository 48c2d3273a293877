import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import SyncCore
import SyncOData
import SyncSQLite

/// `POST /batch` (docs/batch.md, our extension): an ordered list of table writes in one request, each answered
/// exactly as the same request to `/tables/…` would be.
///
/// The operations run one after another through the same hops as single requests — the wire of the request's
/// dialect and the table service (``TableRoutes/write(_:head:call:wire:body:location:)``), with no second router — so
/// access rules, hooks, preconditions, conflicts and per-user scoping are the same. By default each runs in its own transaction: an
/// operation on an item whose earlier operation in the batch failed is not applied (424), and the first operation
/// answered 5xx ends the batch (the answer lists the operations processed; those after it were not applied). An
/// atomic batch (`"atomic": true`, a *set*) runs in one transaction of the store (``TableStore/atomically(_:)``):
/// all its operations are applied, or — when any is answered anything but 2xx — none, and every other operation is
/// answered 424.
struct BatchEndpoint: Sendable {
    /// The most operations in one batch.
    static let maxOperations = 500
    /// The header on table responses that offers the endpoint, with its limits.
    static let capabilityHeader = HTTPField.Name("X-OfflineSync-Batch")!

    /// The table routes, whose writes the operations are.
    let tables: TableRoutes
    let maxBodySize: Int
    /// The store, whose transaction an atomic batch runs in.
    let store: any TableStore
    /// The change notices, which an atomic batch gives after its commit.
    let changes: ChangeHub

    /// The value of ``capabilityHeader``: `max-operations=500, max-bytes=1048576`, then `atomic` when the store
    /// applies sets.
    var capability: String {
        "max-operations=\(Self.maxOperations), max-bytes=\(maxBodySize)" + (store.offersAtomicSets ? ", atomic" : "")
    }

    private struct Operation {
        let method: HTTPRequest.Method
        let path: String
        let headers: HTTPFields
        let body: JSONValue?
        /// The table and item as its URL names them (the item percent-encoded, as a route's path gives it).
        let table: String
        let pathItem: String?
        /// `table/id` of the item it writes (nil when the server makes the id).
        let item: String?
    }

    func handle(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (operations, atomic) = try await parse(request)
        if atomic { return try await handleSet(operations, request, context) }
        let (answers, _) = try await run(operations, tables, request, context)
        return JSONResponse.make(.ok, ["responses": .array(answers)])
    }

    /// Runs the operations in order and answers each: one on an item whose earlier operation failed is not applied
    /// (424); the first answered 5xx ends the run. Also says whether any was answered anything but 2xx.
    @Sendable private func run(
        _ operations: [Operation], _ tables: TableRoutes, _ request: Request, _ context: SyncRequestContext
    ) async throws -> (answers: [JSONValue], failed: Bool) {
        var answers: [JSONValue] = []
        answers.reserveCapacity(operations.count)
        var failed: Set<String> = []
        var anyFailed = false
        let origin = LinkBuilder(request).origin  // the batch's, read once: each operation's item URLs start with it
        for operation in operations {
            if let item = operation.item, failed.contains(item) {
                anyFailed = true
                answers.append(
                    Self.answer(
                        .init(code: 424, reasonPhrase: "Failed Dependency"),
                        body: ["error": "Not applied: an earlier operation on this item in the batch failed"]))
                continue
            }
            let response = await respond(operation, tables, origin: origin, request, context)
            answers.append(try await Self.answer(response))
            if response.status.kind == .serverError { return (answers, true) }
            if response.status.kind != .successful {
                anyFailed = true
                if let item = operation.item { failed.insert(item) }
            }
        }
        return (answers, anyFailed)
    }

    /// An atomic batch: every operation in one transaction of the store, kept only when all are answered 2xx. Every
    /// operation is run, so that each failure is answered as itself (a replayed set's members each say they were
    /// applied before); when any failed, the others are answered 424.
    private func handleSet(_ operations: [Operation], _ request: Request, _ context: SyncRequestContext)
        async throws -> Response
    {
        guard store.offersAtomicSets else {
            throw APIError.badRequest("This server's store cannot apply a batch atomically; send it without \"atomic\"")
        }
        do {
            let keys = Locked(Set<String>())
            let answers = try await store.atomically { set in
                let members = TableRoutes(service: tables.service.inSet(set, holding: keys), maxBodySize: maxBodySize)
                let (answers, failed) = try await run(operations, members, request, context)
                if failed { throw Refused(answers: answers) }
                return answers
            }
            for key in keys.withLock({ $0 }) { changes.publish(key) }
            return JSONResponse.make(.ok, ["atomic": true, "applied": true, "responses": .array(answers)])
        } catch let refused as Refused {
            let isFailure = { (answer: JSONValue) in !(200..<300).contains(answer["status"]?.intValue ?? 0) }
            let first = (refused.answers.firstIndex(where: isFailure) ?? 0) + 1
            let notApplied = Self.answer(
                .init(code: 424, reasonPhrase: "Failed Dependency"),
                body: ["error": .string("Not applied: operation \(first) of the atomic batch failed")])
            var answers = Array(repeating: notApplied, count: operations.count)
            for (index, answer) in refused.answers.enumerated() where isFailure(answer) { answers[index] = answer }
            return JSONResponse.make(.ok, ["atomic": true, "applied": false, "responses": .array(answers)])
        } catch let error as TableStoreError {
            guard case .unavailable(let reason) = error else { throw error }
            throw APIError(.serviceUnavailable, "The batch was not applied: \(reason)")
        }
    }

    /// Thrown out of an atomic batch's transaction to undo it, with its answers.
    private struct Refused: Error { let answers: [JSONValue] }

    /// One operation as the table routes write it; a thrown answer becomes its response (a refusal counted as the
    /// routes count theirs), any other error a 500.
    private func respond(
        _ operation: Operation, _ tables: TableRoutes, origin: String, _ request: Request,
        _ context: SyncRequestContext
    ) async -> Response {
        var head = HTTPRequest(method: operation.method, scheme: nil, authority: request.head.authority, path: "/")
        head.path = operation.path
        head.headerFields = operation.headers
        let call = TableCall(
            caller: context.caller, table: operation.table, item: operation.pathItem, logger: context.logger,
            dialect: context.dialect)
        let links = LinkBuilder(origin: origin, path: "/tables/\(operation.table)")
        do {
            return try await tables.write(operation.method, head: head, call: call, wire: context.wire) {
                guard case .object(let fields)? = operation.body else {
                    throw APIError.badRequest("The body must be a JSON object")
                }
                return fields
            } location: { id, item in
                links.itemURL(id: id, item: item)
            }
        } catch let error as APIError {
            UnexpectedErrorMiddleware.count(error)
            return error.response
        } catch let error as any HTTPResponseError {
            return (try? error.response(from: request, context: context))
                ?? JSONResponse.make(.internalServerError, ["error": "The server could not complete the operation"])
        } catch {
            context.logger.error(
                "Unexpected error in a batch", metadata: ["sync.error": "\(String(reflecting: type(of: error)))"])
            return JSONResponse.make(.internalServerError, ["error": "The server could not complete the operation"])
        }
    }

    /// The request's operations, all checked before any runs: 400 for a malformed one, 413 past the limits.
    private func parse(_ request: Request) async throws -> (operations: [Operation], atomic: Bool) {
        let value = try await JSONBody.read(request, maxBytes: maxBodySize, what: "The batch")
        guard let list = value["requests"]?.arrayValue else {
            throw APIError.badRequest(#"The body must be a JSON object with a "requests" array"#)
        }
        guard list.count <= Self.maxOperations else {
            throw APIError.badRequest("A batch holds at most \(Self.maxOperations) operations, not \(list.count)")
        }
        let atomic = value["atomic"] ?? .bool(false)
        guard let isAtomic = atomic.boolValue else { throw APIError.badRequest(#""atomic" must be true or false"#) }
        let version = request.headers[HTTPField.Name("ZUMO-API-VERSION")!]
        let operations = try list.enumerated().map { index, entry in
            try Self.operation(entry, number: index + 1, version: version)
        }
        return (operations, isAtomic)
    }

    private static func operation(_ entry: JSONValue, number: Int, version: String?) throws -> Operation {
        func refuse(_ reason: String) -> APIError { .badRequest("Operation \(number): \(reason)") }
        guard case .object(let members) = entry else { throw refuse("must be a JSON object") }
        let methods: [String: HTTPRequest.Method] = ["POST": .post, "PATCH": .patch, "DELETE": .delete]
        guard let name = members["method"]?.stringValue, let method = methods[name] else {
            throw refuse(#""method" must be POST, PATCH or DELETE"#)
        }
        guard var url = members["url"]?.stringValue else { throw refuse(#""url" must be a string"#) }
        if !url.hasPrefix("/") { url = "/" + url }
        // Split by scalars, not characters: a '/' followed by a combining mark is one character, not a separator.
        let path = url.unicodeScalars.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
            .split(separator: "/", omittingEmptySubsequences: false).map { String(String.UnicodeScalarView($0)) }
        guard path.count == 3 || path.count == 4, path[1] == "tables", !path[2].isEmpty,
            path.count == 3 || !path[3].isEmpty
        else { throw refuse(#""url" must be tables/{table} or tables/{table}/{id}"#) }
        guard path.count == 4 || method == .post else { throw refuse("\(name) needs an item: tables/{table}/{id}") }
        var headers: HTTPFields = [:]
        if case .object(let given)? = members["headers"] {
            for (field, value) in given {
                // Names of letters, digits and '-'; values of printable ASCII (as the OpenAPI document says).
                guard !field.isEmpty, field.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0.isASCIIAlphanumeric }),
                    let name = HTTPField.Name(field), let text = value.stringValue,
                    text.utf8.allSatisfy({ (0x20...0x7e).contains($0) })
                else {
                    throw refuse(
                        "header \(field) must be a name of letters, digits and '-' with a printable ASCII value")
                }
                headers[name] = text
            }
        } else if let given = members["headers"], given != .null {
            throw refuse(#""headers" must be an object"#)
        }
        let body = members["body"].flatMap { $0 == .null ? nil : $0 }
        if let body {
            guard case .object = body else { throw refuse(#""body" must be a JSON object"#) }
            headers[.contentType] = "application/json"
        } else if method != .delete, path.count == 3 || method == .patch {
            throw refuse("\(name) needs a body")
        }
        if let version { headers[HTTPField.Name("ZUMO-API-VERSION")!] = version }
        let table = path[2].lowercased()
        let item: String? =
            path.count == 4
            ? "\(table)/\(ODataQuery.percentDecode(path[3]) ?? path[3])"
            : body?["id"]?.stringValue.map { "\(table)/\($0)" }
        return Operation(
            method: method, path: url, headers: headers, body: body, table: path[2],
            pathItem: path.count == 4 ? path[3] : nil, item: item)
    }

    /// A response as the batch answers it: its status, its `ETag` and its JSON body.
    private static func answer(_ response: Response) async throws -> JSONValue {
        let json = try await response.collectedBody().withUnsafeReadableBytes { raw in
            raw.isEmpty ? nil : try? JSONValue(parsingUTF8: raw.bindMemory(to: UInt8.self))
        }
        return answer(response.status, body: json, eTag: response.headers[.eTag])
    }

    private static func answer(_ status: HTTPResponse.Status, body: JSONValue?, eTag: String? = nil) -> JSONValue {
        var answer: [String: JSONValue] = ["status": .int(Int64(status.code))]
        if let eTag { answer["headers"] = ["ETag": .string(eTag)] }
        if let body { answer["body"] = body }
        return .object(answer)
    }
}

extension Response {
    /// The response's body, collected (a batch's answers; tests).
    func collectedBody() async throws -> ByteBuffer {
        let collected = Collected()
        try await body.write(Collector(into: collected))
        return collected.buffer
    }
}

/// A response body, collected by ``Collector``.
private final class Collected: @unchecked Sendable {  // @unchecked: written by one task, read after.
    var buffer = ByteBuffer()
}

/// Collects a response body into a ``Collected``.
private struct Collector: ResponseBodyWriter {
    let into: Collected

    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        into.buffer.writeBuffer(&buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// Offers `POST /batch` on every table response that is not a refusal, with its limits
/// (``BatchEndpoint/capabilityHeader``), so that a client learns of it without a request of its own.
struct OfferBatchMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let capability: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response = try await next(request, context)
        response.headers[BatchEndpoint.capabilityHeader] = capability
        return response
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
