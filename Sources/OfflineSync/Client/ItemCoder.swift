import Foundation
import SyncCore

/// Turns typed items into JSON and back: dates as wire dates, and `JSONValue` items untouched.
enum ItemCoder {
    static func json<Item: Encodable>(_ item: Item) throws -> JSONValue {
        if let value = item as? JSONValue { return value }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(WireDate(date).description)
        }
        return try JSONValue(parsing: try encoder.encode(item))
    }

    /// `value` as an `Item`; ``ItemDecodingError`` (naming `table`, the row and the field) when it does not fit.
    static func item<Item: Decodable>(_ value: JSONValue, as type: Item.Type, in table: TableName? = nil) throws -> Item
    {
        do {
            return try JSONValueDecoder.decode(Item.self, from: value)
        } catch let error as DecodingError {
            throw ItemDecodingError.decoding(value, table: table, error: error)
        }
    }

    /// The fields of `row` that `Item` knows: those it reads when it decodes the row. Nil when it is the row itself
    /// (`JSONValue`), reads every field or not as an object, or cannot decode the row: then it knows them all.
    static func knownFields<Item: Decodable>(of type: Item.Type, in row: JSONValue) -> Set<String>? {
        guard type != JSONValue.self else { return nil }
        let recorder = JSONValueDecoder.KeyRecorder()
        guard (try? JSONValueDecoder(value: row, recorder: recorder).decodeValue(type)) != nil,
            recorder.readsObject, !recorder.readsEveryKey
        else { return nil }
        return recorder.keys
    }
}
