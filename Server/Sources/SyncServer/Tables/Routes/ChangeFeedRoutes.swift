import Foundation
import Hummingbird
import ServiceLifecycle
import SyncCore

/// `GET /changes`, the long poll that tells a device which of its tables changed (docs/changes.md).
struct ChangeFeedRoutes: Sendable {
    let service: TableService

    func addRoutes(to router: Router<SyncRequestContext>) {
        router.get("changes") { request, context in try await changes(request, context) }
    }

    /// `GET /changes?tables=A,B&since=TOKEN&wait=SECONDS` (docs/changes.md): answers once one of the tables
    /// changed after the token, or after `wait` seconds (default 25, at most 60), with
    /// `{"token": next, "changed": [tables]}`. It carries no row data: the client pulls, and the pull enforces
    /// access. Every table must be readable by the caller (401/403/404 otherwise).
    func changes(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let call = context.call
        var tables: [String] = []
        var since: String?
        var wait = Duration.seconds(25)
        for pair in (request.uri.query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            let value = parts.count == 2 ? (parts[1].removingPercentEncoding ?? parts[1]) : ""
            switch parts.first {
            case "tables": tables = value.split(separator: ",").map(String.init)
            case "since": since = value.isEmpty ? nil : value
            case "wait":
                guard let seconds = Int(value), (0...60).contains(seconds) else {
                    throw APIError.badRequest("wait: a whole number of seconds, 0 to 60")
                }
                wait = .seconds(seconds)
            default: break
            }
        }
        guard !tables.isEmpty, tables.count <= 100 else {
            throw APIError.badRequest("tables: name 1 to 100 tables, separated by commas")
        }
        var keys: [String: String] = [:]  // key → the name as the client wrote it
        for text in tables {
            let name: TableName
            do { name = try TableName(text) } catch { throw APIError.badRequest("\(error)") }
            guard let schema = try await service.store.schema(of: name) else {
                throw APIError(.notFound, TableStoreError.unknownTable(name).description)
            }
            keys[TableService.changeKey(schema, owner: try await service.access.authorize(.read, schema, call).owner)] =
                text
        }
        // A server shutting down answers its waiting followers at once rather than holding them for `wait`.
        let hub = service.changes
        let waiting = Task { [keys] in await hub.wait(Set(keys.keys), since: since, timeout: wait) }
        let (changed, token) = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await waiting.value
            } onGracefulShutdown: {
                waiting.cancel()
            }
        } onCancel: {
            waiting.cancel()
        }
        let names = changed.compactMap { keys[$0] }.sorted()
        return JSONResponse.make(.ok, ["token": .string(token), "changed": .array(names.map(JSONValue.string))])
    }
}
