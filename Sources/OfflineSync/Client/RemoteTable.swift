public import SyncCore
import SyncOData

/// A table used online only: each call is one request (PROTOCOL.md §3); the local store is not
/// touched. Network errors are thrown.
public struct RemoteTable<Item: Codable & Sendable>: Sendable {
    /// The table's name.
    public let name: TableName
    let endpoint: TableEndpoint

    /// Items matching a query.
    ///
    /// - Parameter query: The query.
    /// - Returns: The items of one page (the server's page size caps it).
    /// - Throws: ``RemoteTableError`` or ``TransportError``; ``AccountError`` (nothing sent); `ValueError` before
    ///   anything is sent when a key path of `query` names no field.
    public func items(matching query: TableQuery<Item> = TableQuery()) async throws -> [Item] {
        let query = try query.checked()
        let response = try await endpoint.send(
            "GET", endpoint.url(name, query: query.queryString(dialect: endpoint.wire.odata)),
            features: ["TQ"])
        let body = try Self.check(response, expecting: [200])
        let items = body.arrayValue ?? body[endpoint.wire.pageRows]?.arrayValue ?? []
        return try items.map { try ItemCoder.item($0, as: Item.self) }
    }

    /// One item.
    ///
    /// - Parameter id: The item's id (of a table of integer ids: the number's digits, `ItemID("42")`).
    /// - Returns: The item, or nil when the server has none (or, under v3, only its tombstone: 410).
    /// - Throws: ``RemoteTableError`` or ``TransportError``; ``AccountError`` (nothing sent).
    public func item(id: ItemID) async throws -> Item? {
        let response = try await endpoint.send("GET", endpoint.url(name, id: id), features: [])
        if response.status == 404 || response.status == 410 { return nil }
        _ = try Self.check(response, expecting: [200])
        return try ItemCoder.item(response.item ?? .null, as: Item.self)
    }

    /// Inserts an item (of a table of integer ids: its `id` 0 or absent; the server gives the next number).
    ///
    /// - Parameter item: The item.
    /// - Returns: The stored item.
    /// - Throws: ``RemoteTableError`` (409 carries the stored item) or ``TransportError``; ``AccountError``.
    @discardableResult
    public func insert(_ item: Item) async throws -> Item {
        let body = try ItemCoder.json(item).removing(SystemProperty.serverManaged)
        let response = try await endpoint.send("POST", endpoint.url(name), body: body, features: [])
        _ = try Self.check(response, expecting: [200, 201])
        return try ItemCoder.item(response.item ?? .null, as: Item.self)
    }

    /// Updates an item, with its `version` as the precondition: v2 sends its fields (`PATCH`), v3 replaces the
    /// server's item with it (`PUT`: fields it lacks become null).
    ///
    /// - Parameter item: The changed item.
    /// - Returns: The stored item.
    /// - Throws: ``RemoteTableError`` (412 carries the server's copy) or ``TransportError``; ``AccountError``.
    @discardableResult
    public func update(_ item: Item) async throws -> Item {
        let value = try ItemCoder.json(item)
        let id = try Self.id(of: value)
        let response = try await endpoint.send(
            endpoint.wire.updateMethod, endpoint.url(name, id: id),
            body: value.removing(SystemProperty.serverManaged),
            ifMatch: value.version,
            features: value.version == nil ? [] : ["OC"])
        _ = try Self.check(response, expecting: [200])
        return try ItemCoder.item(response.item ?? .null, as: Item.self)
    }

    /// Deletes an item, with its `version` as the precondition when it has one.
    ///
    /// - Parameter item: The item.
    /// - Throws: ``RemoteTableError`` or ``TransportError``; ``AccountError`` (nothing sent).
    public func delete(_ item: Item) async throws {
        let value = try ItemCoder.json(item)
        let id = try Self.id(of: value)
        let response = try await endpoint.send(
            "DELETE", endpoint.url(name, id: id), ifMatch: value.version, features: [])
        _ = try Self.check(response, expecting: [200, 204])
    }

    /// The id of an item: its string, or — in a table of integer ids — its positive number.
    private static func id(of value: JSONValue) throws -> ItemID {
        if let id = value.itemID { return id }
        if let number = value[SystemProperty.id.rawValue]?.intValue, number > 0 { return try ItemID(String(number)) }
        throw ValueError(kind: "item", reason: "it has no valid 'id'")
    }

    private static func check(_ response: HTTPResponseData, expecting statuses: Set<Int>) throws -> JSONValue {
        guard statuses.contains(response.status) else {
            throw RemoteTableError(status: response.status, message: response.message, serverItem: response.item)
        }
        return response.json ?? .null
    }
}

/// The server refused an online request.
public struct RemoteTableError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status.
    public var status: Int
    /// The server's message.
    public var message: String?
    /// The server's copy of the item, for 409 and 412.
    public var serverItem: JSONValue?

    /// One line.
    public var description: String { "Server refused the request (\(status)): \(message ?? "no message")" }
}
