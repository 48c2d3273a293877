import HTTPTypes
import SyncCore

/// A write to one row as the table service runs it, whatever route or dialect spells it (v2 `POST`, `PATCH`,
/// `DELETE`, undelete; v3 `POST`, `PUT`, `DELETE`; an operation of `/batch`): a wire translates its request into one
/// of these — data only, no request, no closure over one — and ``TableService/write(_:to:as:)`` decides it.
struct WriteRequest: Sendable {
    /// What the write does to the row.
    enum Action: Sendable {
        /// A new row with these fields (its id is ``WriteRequest/id``, or one the service makes).
        case insert([String: JSONValue])
        /// The fields given change, the others stay (v2 `PATCH`).
        case change([String: JSONValue])
        /// The row becomes these fields (v3 `PUT`): user fields left out become null, `deleted` is stored as given
        /// (absent: false) — so a replace may also delete the row or bring its tombstone back.
        case replace([String: JSONValue])
        /// The row becomes a tombstone (or goes, without soft delete).
        case delete
        /// The tombstone comes back.
        case undelete
    }

    /// How a failed precondition is answered: 412 (`If-Match`, v3's conditions) or 409 (a v2 body `version`).
    enum ConflictAnswer: Sendable {
        case preconditionFailed, conflict

        var status: HTTPResponse.Status { self == .conflict ? .conflict : .preconditionFailed }
    }

    /// The row; nil for an insert whose id the service makes (``TableService/newID(for:)``).
    var id: ItemID?
    var action: Action
    /// The version the row must have.
    var precondition: Precondition?
    var conflictAnswer = ConflictAnswer.preconditionFailed
    /// Whether the write may reach a tombstone (`__includedeleted=true`).
    var includeDeleted = false
    /// A check of the stored row before anything else is decided (v3): 404 when missing, 410 for a tombstone unless
    /// `includeDeleted`, 412 when its conditions fail; with `If-Match`, the version checked is then the write's
    /// precondition, so that a write between the check and this one is a 412 too.
    var storedCheck: ItemConditions?
    /// How a row is shown in a conflict's body (the dialect's ``TableWire/shown(_:)``).
    var shown: @Sendable (JSONValue) -> JSONValue = { $0 }
    /// For an insert a client sends again after a lost reply, a stamp of the table no later than its first send
    /// (``TableConfiguration/resendFloorHeader``): the insert is refused when it may have landed and been deleted, and
    /// the tombstone that would say so was removed (``TableService/write(_:to:as:)``).
    var resendFloor: WireDate?

    /// The effect whose access rule the route holds before the request is read.
    var effect: WriteEffect {
        switch action {
        case .insert: .insert
        case .change, .replace: .change
        case .delete: .delete
        case .undelete: .undelete
        }
    }
}

/// What a call reaches once its access rule holds (``TableService/target(_:_:)``): the table, the item the path
/// names (nil on a table's URL) and the caller's scope for a read or for a write's effect.
struct TableTarget: Sendable {
    /// The effect whose rule was checked; nil for a read.
    let effect: WriteEffect?
    let schema: TableSchema
    let pathID: ItemID?
    let scope: RowScope

    /// The item the path names: 404 on a table's URL.
    func item() throws -> ItemID {
        guard let pathID else { throw APIError(.notFound, "The URL names no item") }
        return pathID
    }
}

/// How the dialects read a write's body (no I/O): the rules both share.
enum WriteBody {
    /// An insert of `body`: with the id it gives, or nil for one the service makes (in a table of integer ids,
    /// always: a body may name none, or null, 0 or ""). 400 for an id of the wrong kind or a system property of the
    /// wrong type.
    static func insert(_ body: [String: JSONValue], _ schema: TableSchema) throws -> WriteRequest {
        var fields = body
        try checkSystemProperties(fields, schema)
        let id: ItemID?
        switch (fields[SystemProperty.id.rawValue], schema.configuration.integerIDs) {
        case (nil, _), (.null?, _), (.int(0)?, true), (.string("")?, true):
            id = nil
        case (.string(let text)?, false):
            do { id = try ItemID(text) } catch { throw APIError.badRequest("\(error)") }
        case (_, true):
            throw APIError.badRequest("Invalid item: \(schema.name)'s ids are assigned by the server; send no 'id'")
        default:
            throw APIError.badRequest("Invalid item: 'id' must be a string")
        }
        fields[SystemProperty.id.rawValue] = nil
        return WriteRequest(id: id, action: .insert(fields))
    }

    /// The body of a change to the item `id` (PATCH, v3's PUT): system properties of the right types, and an `id`,
    /// if given, equal to the URL's — compared as bytes: two normalizations of one text are two ids (issue 14,
    /// point 9). 400 otherwise.
    static func change(_ fields: [String: JSONValue], id: ItemID, _ schema: TableSchema) throws -> [String: JSONValue] {
        try checkSystemProperties(fields, schema)
        let integerIDs = schema.configuration.integerIDs
        if let bodyID = fields[SystemProperty.id.rawValue], bodyID != .null,
            (integerIDs ? IntegerIDs.storedText(of: bodyID) : bodyID.stringValue)
                .map({ !$0.utf8.elementsEqual(id.rawValue.utf8) }) ?? true
        {
            throw APIError.badRequest("The item ID and querystring ID did not match")
        }
        return fields
    }

    /// Refuses system properties of the wrong JSON type (the server sets them, but a client that sends
    /// `"version": {}` has a bug worth hearing about): strings for id, version and the dates, a bool for deleted; in a
    /// table of integer ids, a number for id.
    static func checkSystemProperties(_ fields: [String: JSONValue], _ schema: TableSchema) throws {
        for property in SystemProperty.allCases {
            guard let value = fields[property.rawValue], value != .null else { continue }
            if property == .id, schema.configuration.integerIDs {
                guard value.intValue != nil || value == .string("") else {
                    throw APIError.badRequest("Invalid item: 'id' must be an integer")
                }
                continue
            }
            let fits = property == .deleted ? value.boolValue != nil : value.stringValue != nil
            if !fits {
                throw APIError.badRequest(
                    "Invalid item: '\(property.rawValue)' must be \(property == .deleted ? "true or false" : "a string")"
                )
            }
        }
    }
}
