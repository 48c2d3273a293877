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

    static func item<Item: Decodable>(_ value: JSONValue, as type: Item.Type) throws -> Item {
        try JSONValueDecoder.decode(Item.self, from: value)
    }
}
