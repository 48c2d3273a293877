import Foundation
import SyncSQLite

/// Finds which coded field a key path of a `Decodable` model reads, so queries can be written against the model
/// (`$0.complete == false`, `.orderBy(\.text)`) and still name the field as the wire does (its `CodingKey`).
///
/// How: the model is decoded once from a probe decoder that answers every request with a base value, and once
/// more per top-level key with that key's values changed (0 → 1, false → true, "…0" → "…1", the second case of a
/// `CaseIterable` enum). A key path belongs to the key whose instance reads a different value through it, provided
/// the key decoded the key path's type (or its optional). A key path resolves only if exactly one key qualifies:
/// nested paths (`\.address.city`), computed properties over several fields, and fields the probe cannot vary (a
/// dictionary, a one-case enum) do not, and the query that names them throws `ValueError` when it runs.
enum FieldNames {
    /// What the probe learnt about one model type.
    private struct Probe {
        /// The decoded instance with base values.
        let base: Any
        /// Per top-level key, in decoding order: the key, the instance with that key's values changed (nil when
        /// the model refused them), and the types the key was decoded as.
        let variants: [(key: String, instance: Any?, types: Set<ObjectIdentifier>)]
    }

    private static let probes = Locked<[ObjectIdentifier: Result<Probe, ProbeFailure>]>([:])

    /// Why a model could not be probed, or a key path names no field: one line for `ValueError`'s reason.
    struct ProbeFailure: Error {
        let message: String
    }

    /// The field `keyPath` reads, by its coded name.
    static func name<Item: Decodable, Value: Equatable>(of keyPath: KeyPath<Item, Value>) -> Result<
        String, ProbeFailure
    > {
        Result { try resolve(keyPath) }.mapError { $0 as? ProbeFailure ?? ProbeFailure(message: "\($0)") }
    }

    private static func resolve<Item: Decodable, Value: Equatable>(_ keyPath: KeyPath<Item, Value>) throws
        -> String
    {
        let probe = try probe(Item.self).get()
        guard let base = probe.base as? Item else { throw unresolved(keyPath, "the probe made no \(Item.self)") }
        let baseValue = base[keyPath: keyPath]
        let matches = probe.variants.filter { variant in
            guard let instance = variant.instance as? Item, instance[keyPath: keyPath] != baseValue else {
                return false
            }
            return variant.types.contains(ObjectIdentifier(Value.self))
        }
        guard matches.count == 1, let match = matches.first else {
            throw unresolved(keyPath, matches.isEmpty ? "no coded field reads it" : "it reads several fields")
        }
        return match.key
    }

    private static func unresolved(_ keyPath: AnyKeyPath, _ reason: String) -> ProbeFailure {
        ProbeFailure(
            message: "the key path \(keyPath) names no field of \(type(of: keyPath).rootType) (\(reason)); "
                + "name the field with .field(\"name\") instead")
    }

    private static func probe<Item: Decodable>(_ type: Item.Type) -> Result<Probe, ProbeFailure> {
        let id = ObjectIdentifier(type)
        if let known = probes.withLock({ $0[id] }) { return known }
        let result = Result { () throws(ProbeFailure) -> Probe in
            let recorder = ProbeDecoder.Recorder()
            let base: Item
            do {
                base = try Item(from: ProbeDecoder(marked: nil, recorder: recorder))
            } catch {
                throw ProbeFailure(
                    message: "\(Item.self) could not be decoded from probe values, so queries cannot name its "
                        + "fields by key path (\(error)); name them with .field(\"name\") instead")
            }
            let variants = recorder.keys.map { key in
                let instance = try? Item(from: ProbeDecoder(marked: key, recorder: nil))
                return (key: key, instance: instance as Any?, types: recorder.types[key] ?? [])
            }
            return Probe(base: base, variants: variants)
        }
        probes.withLock { $0[id] = result }
        return result
    }
}

/// A decoder that makes up a value for every request: base values, or changed ones under the top-level key
/// `marked`. With a recorder, it notes each top-level key and the types decoded for it.
private struct ProbeDecoder: Decoder {
    final class Recorder {
        var keys: [String] = []
        var types: [String: Set<ObjectIdentifier>] = [:]

        func note(_ key: String, _ types: [Any.Type]) {
            if self.types[key] == nil { keys.append(key) }
            self.types[key, default: []].formUnion(types.map { ObjectIdentifier($0) })
        }
    }

    /// The top-level key whose values change; nil for none.
    let marked: String?
    /// Notes the top-level keys, when given.
    let recorder: Recorder?
    /// Whether this decoder is under the marked key.
    var isMarked = false
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(KeyedProbe<Key>(decoder: self))
    }

    func unkeyedContainer() -> any UnkeyedDecodingContainer { UnkeyedProbe(decoder: self) }

    func singleValueContainer() -> any SingleValueDecodingContainer { SingleValueProbe(decoder: self) }

    /// The decoder for the value under `key`; under the top-level key `marked`, it changes values.
    func child(_ key: any CodingKey) -> ProbeDecoder {
        ProbeDecoder(
            marked: marked, recorder: recorder, isMarked: isMarked || (codingPath.isEmpty && key.stringValue == marked),
            codingPath: codingPath + [key])
    }

    /// A value of `type`: base or changed.
    func value<T: Decodable>(_ type: T.Type) throws -> T {
        let step = isMarked ? 1 : 0
        let value: Any? =
            switch type {
            case is Bool.Type: step == 1
            case is String.Type: "00000000-0000-0000-0000-00000000000\(step)"
            case is Int.Type: step
            case is Int8.Type: Int8(step)
            case is Int16.Type: Int16(step)
            case is Int32.Type: Int32(step)
            case is Int64.Type: Int64(step)
            case is UInt.Type: UInt(step)
            case is UInt8.Type: UInt8(step)
            case is UInt16.Type: UInt16(step)
            case is UInt32.Type: UInt32(step)
            case is UInt64.Type: UInt64(step)
            case is Double.Type: Double(step)
            case is Float.Type: Float(step)
            default: (type as? any CaseIterable.Type).flatMap { Self.someCase($0, step) }
            }
        if let value = value as? T { return value }
        return try T(from: self)
    }

    private static func someCase<C: CaseIterable>(_ type: C.Type, _ step: Int) -> Any? {
        let cases = Array(type.allCases)
        return cases.count > step ? cases[step] : cases.first
    }
}

private struct KeyedProbe<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ProbeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if decoder.codingPath.isEmpty { decoder.recorder?.note(key.stringValue, [T.self]) }
        return try decoder.child(key).value(type)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        if decoder.codingPath.isEmpty { decoder.recorder?.note(key.stringValue, [T.self, T?.self]) }
        return try decoder.child(key).value(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key)
        -> KeyedDecodingContainer<NestedKey>
    {
        decoder.child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedDecodingContainer {
        decoder.child(key).unkeyedContainer()
    }

    func superDecoder() -> any Decoder { decoder }
    func superDecoder(forKey key: Key) -> any Decoder { decoder.child(key) }
}

/// An array: empty, or one changed element.
private struct UnkeyedProbe: UnkeyedDecodingContainer {
    let decoder: ProbeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { decoder.isMarked ? 1 : 0 }
    var currentIndex = 0
    var isAtEnd: Bool { currentIndex >= (count ?? 0) }

    init(decoder: ProbeDecoder) { self.decoder = decoder }

    mutating func decodeNil() -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        currentIndex += 1
        return try decoder.value(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) -> KeyedDecodingContainer<
        NestedKey
    > {
        currentIndex += 1
        return decoder.container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedDecodingContainer {
        currentIndex += 1
        return decoder.unkeyedContainer()
    }

    mutating func superDecoder() -> any Decoder { decoder }
}

private struct SingleValueProbe: SingleValueDecodingContainer {
    let decoder: ProbeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decoder.value(type)
    }
}
