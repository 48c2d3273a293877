import Foundation
import SyncCore

/// One measured case: our figure beside its physical reference from the same run.
struct BenchResult: Sendable {
    var name: String
    var ours: Double
    var reference: Double?
    var unit: String
    var higherIsBetter: Bool
    var n: Int

    /// ours / reference when higher is better, reference / ours otherwise: above 1 means we beat it.
    var ratio: Double? {
        guard let reference, reference > 0, ours > 0 else { return nil }
        return higherIsBetter ? ours / reference : reference / ours
    }

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(name), "ours": .double(ours), "unit": .string(unit),
            "higherIsBetter": .bool(higherIsBetter), "n": .int(Int64(n)),
        ]
        object["reference"] = reference.map(JSONValue.double) ?? .null
        object["ratio"] = ratio.map(JSONValue.double) ?? .null
        return .object(object)
    }
}

/// Timing helpers: the median of repeated runs, in seconds.
enum Measure {
    static func seconds(_ body: () async throws -> Void) async rethrows -> Double {
        let clock = ContinuousClock()
        return seconds(try await clock.measure { try await body() })
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[sorted.count / 2]
    }
}
