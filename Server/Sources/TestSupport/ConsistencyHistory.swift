/// What one device did and saw in a chaos run, in order (docs/consistency.md), and the checks of the guarantees a
/// device's own history shows. Each check is one pass over the events.
public struct DeviceHistory: Sendable {
    /// One item as a read showed it: its fields (by name, as text) and the server's stamp of its version
    /// (`updatedAt`; ISO 8601 from the server, so text order is time order).
    public struct ReadItem: Sendable, Equatable {
        public var fields: [String: String]
        public var stamp: String

        public init(fields: [String: String], stamp: String) {
            self.fields = fields
            self.stamp = stamp
        }
    }

    public enum Event: Sendable, Equatable {
        /// A local write the app acknowledged: `field` of `item` is `value`.
        case wrote(item: String, field: String, value: String)
        /// A write whose outcome is not known (killed, refused) or that removes the item (a delete): the item's
        /// fields are not known from the device's own writes until its next acknowledged write.
        case unsure(item: String)
        /// A read of every item the device holds.
        case read([String: ReadItem])
        /// A sync (or anything that takes other devices' writes or the server's choice: a conflict resolved).
        case synced
    }

    public private(set) var events: [Event] = []

    public init(_ events: [Event] = []) { self.events = events }

    public mutating func record(_ event: Event) { events.append(event) }

    /// Counts for a report: reads and acknowledged writes.
    public var counts: (reads: Int, writes: Int) {
        events.reduce(into: (0, 0)) { counts, event in
            switch event {
            case .read: counts.0 += 1
            case .wrote: counts.1 += 1
            default: break
            }
        }
    }

    /// **Read your writes**: between an acknowledged local write and the device's next sync, every read shows it
    /// (the item there, the field with the written value). What it can miss: a write overwritten by a later sync is
    /// not checked past that sync (the later value may rightly be another device's).
    public func readYourWrites() -> [String] {
        var expected: [String: [String: String]] = [:]
        var violations: [String] = []
        for (index, event) in events.enumerated() {
            switch event {
            case .wrote(let item, let field, let value): expected[item, default: [:]][field] = value
            case .unsure(let item): expected[item] = nil
            case .synced: expected = [:]
            case .read(let items):
                for (item, fields) in expected.sorted(by: { $0.key < $1.key }) {
                    guard let seen = items[item] else {
                        violations.append("event \(index): \(item.prefix(8)) written here is missing from a read")
                        continue
                    }
                    for (field, value) in fields.sorted(by: { $0.key < $1.key }) where seen.fields[field] != value {
                        violations.append(
                            "event \(index): \(item.prefix(8)).\(field) read \(seen.fields[field] ?? "nothing") "
                                + "after this device wrote \(value)")
                    }
                }
            }
        }
        return violations
    }

    /// **Monotonic reads**: an item's server stamp never goes back between a device's reads (local writes keep the
    /// stamp they were made over; a sync brings the same or a newer one). What it can miss: two versions with one
    /// stamp (the server's clock in one millisecond).
    public func monotonicReads() -> [String] {
        var latest: [String: String] = [:]
        var violations: [String] = []
        for (index, event) in events.enumerated() {
            guard case .read(let items) = event else { continue }
            for (item, seen) in items.sorted(by: { $0.key < $1.key }) {
                if let before = latest[item], seen.stamp < before {
                    violations.append(
                        "event \(index): \(item.prefix(8)) read at version \(seen.stamp) after \(before)")
                }
                if seen.stamp > latest[item] ?? "" { latest[item] = seen.stamp }
            }
        }
        return violations
    }
}
