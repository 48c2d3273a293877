import Foundation
import Logging
import SyncCore

extension SyncContext {
    /// What happened to one operation.
    enum PushOutcome {
        case pushed
        case failed(OperationError)
        /// A conflict handler settled it without pushing (server wins, discard).
        case resolved
        case skipped
    }

    /// Why a push stops before the end of the queue.
    enum PushStop: Error {
        case network(TransportError)
        case unauthorized
        case cancelled
    }

    /// Sends every pending operation of every table in queue order (PROTOCOL.md §7).
    func pushAll() async throws -> PushResult {
        var result = PushResult()
        var blocked: Set<String> = []  // items whose earlier operation failed: later ones wait
        let parked = Set(
            try await store.read { reader in
                try reader.operationErrors().filter(\.isConflict).map(\.operation.id)
            })
        var after: Int64?
        logger.debug("Push started")
        do {
            while true {
                let position = after
                let operations = try await store.read { reader in try reader.operations(after: position, limit: 200) }
                guard !operations.isEmpty else { break }
                for operation in operations {
                    after = operation.id
                    let key = "\(operation.table.canonical)/\(operation.itemID.rawValue)"
                    if blocked.contains(key) || parked.contains(operation.id) {
                        blocked.insert(key)
                        continue
                    }
                    if Task.isCancelled { throw PushStop.cancelled }
                    switch try await pushOne(operation, retries: 1) {
                    case .pushed: result.pushedCount += 1
                    case .failed(let error):
                        result.errors.append(error)
                        blocked.insert(key)
                    case .resolved, .skipped: break
                    }
                }
            }
        } catch PushStop.network(let error) {
            logger.info("Push stopped: server unreachable", metadata: [SyncLogKey.operations: "\(result.pushedCount)"])
            throw PushError.networkUnavailable(error, result)
        } catch PushStop.unauthorized {
            throw PushError.unauthorized(result)
        } catch PushStop.cancelled {
            throw PushError.cancelled(result)
        }
        logger.debug(
            "Push finished",
            metadata: [SyncLogKey.operations: "\(result.pushedCount)", SyncLogKey.failed: "\(result.errors.count)"])
        if !result.errors.isEmpty {
            logger.info("Push left refused operations", metadata: [SyncLogKey.failed: "\(result.errors.count)"])
            throw PushError.operationsFailed(result)
        }
        return result
    }

    /// Marks one operation in flight, sends it, and records the outcome.
    func pushOne(_ queued: PendingOperation, retries: Int) async throws -> PushOutcome {
        // Mark it in flight and read what to send, in one transaction: a local write after this
        // queues a new operation instead of changing this one.
        let prepared: (PendingOperation, JSONValue?)? = try await store.write { writer in
            guard var operation = try writer.operation(queued.id) else { return nil }
            let row =
                operation.kind == .delete ? operation.item : try writer.item(operation.itemID, in: operation.table)
            if operation.kind != .delete, row == nil {
                try writer.removeOperation(operation.id)  // the row is gone: nothing to send
                return nil
            }
            operation.isInFlight = true
            try writer.updateOperation(operation)
            return (operation, row)
        }
        guard let (operation, row) = prepared else { return .skipped }
        let response: HTTPResponseData
        let sent: JSONValue? = operation.kind == .delete ? nil : row?.removing(SystemProperty.serverManaged)
        do {
            response = try await send(operation, body: sent, version: row?.version)
        } catch let error as TransportError {
            try await clearInFlight(operation)
            if error.code == .cancelled { throw PushStop.cancelled }
            throw PushStop.network(error)
        } catch {
            try await clearInFlight(operation)
            throw error
        }
        if response.status == 401 {
            try await clearInFlight(operation)
            throw PushStop.unauthorized
        }
        if Self.isSuccess(operation, response, sent: sent) {
            try await complete(operation, serverItem: response.item)
            return .pushed
        }
        let error = OperationError(
            operation: operation.withInFlight(false), status: response.status, message: response.message,
            sentItem: sent ?? operation.item, serverItem: response.item)
        try await store.write { writer in
            var cleared = operation
            cleared.isInFlight = false
            try writer.updateOperation(cleared)
            try writer.saveError(error)
        }
        if error.isConflict, let conflictHandler {
            let resolution = try await conflictHandler.resolve(error)
            try await resolve(error, with: resolution)
            if retries > 0, resolution.retries {
                return try await pushOne(operation.withInFlight(false), retries: retries - 1)
            }
            if resolution != .leave { return .resolved }
        }
        return .failed(error)
    }

    private func send(_ operation: PendingOperation, body: JSONValue?, version: Version?) async throws
        -> HTTPResponseData
    {
        let features = version == nil ? ["OL"] : ["OC", "OL"]
        switch operation.kind {
        case .insert:
            return try await endpoint.send("POST", endpoint.url(operation.table), body: body, features: ["OL"])
        case .update:
            return try await endpoint.send(
                "PATCH", endpoint.url(operation.table, id: operation.itemID), body: body, ifMatch: version,
                features: features)
        case .delete:
            return try await endpoint.send(
                "DELETE", endpoint.url(operation.table, id: operation.itemID), ifMatch: version, features: features)
        }
    }

    /// Success, including a delete of an item already gone (404) and an insert answered 409 with the
    /// same user fields (the first attempt's reply was lost).
    static func isSuccess(_ operation: PendingOperation, _ response: HTTPResponseData, sent: JSONValue?) -> Bool {
        if (200..<300).contains(response.status) { return true }
        switch (operation.kind, response.status) {
        case (.delete, 404): return true
        case (.insert, 409):
            guard let server = response.item, let sent, server["deleted"]?.boolValue != true else { return false }
            return server.userFields.objectValue?.filter { $0.value != .null }
                == sent.userFields.objectValue?.filter { $0.value != .null }
        default: return false
        }
    }

    private func clearInFlight(_ operation: PendingOperation) async throws {
        try await store.write { writer in
            try writer.updateOperation(operation.withInFlight(false))
        }
    }

    /// Removes a pushed operation and stores the server's item, unless a newer operation for the item
    /// was queued meanwhile: then only the server's version is taken, for the next precondition.
    private func complete(_ operation: PendingOperation, serverItem: JSONValue?) async throws {
        try await store.write { writer in
            try writer.removeOperation(operation.id)
            let newer = try writer.lastOperation(for: operation.itemID, in: operation.table)
            guard let serverItem else { return }
            if var newer {
                if newer.kind == .delete {
                    newer.item?["version"] = serverItem["version"]
                    try writer.updateOperation(newer)
                } else if var row = try writer.item(operation.itemID, in: operation.table) {
                    row["version"] = serverItem["version"]
                    try writer.upsert(row, in: operation.table)
                }
            } else if operation.kind != .delete {
                if serverItem.isDeleted {
                    try writer.deleteItem(operation.itemID, in: operation.table)
                } else {
                    try writer.upsert(serverItem, in: operation.table)
                }
            }
        }
    }
}

extension PendingOperation {
    func withInFlight(_ value: Bool) -> PendingOperation {
        var copy = self
        copy.isInFlight = value
        return copy
    }
}

extension ConflictResolution {
    /// Whether the operation is pushed again after this resolution.
    var retries: Bool {
        switch self {
        case .keepMine, .changeKind: true
        default: false
        }
    }
}
