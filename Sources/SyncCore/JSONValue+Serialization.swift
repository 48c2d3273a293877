public import Foundation

extension JSONValue {
    /// The compact JSON text of this value, object keys sorted, doubles written with full precision.
    ///
    /// A double that is not finite (which no parsed JSON can hold) is written as `null`.
    /// - Returns: The JSON text.
    public func serialized() -> String {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        write(to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// The compact JSON text of this value as UTF-8 data (see ``serialized()``).
    ///
    /// - Returns: The UTF-8 encoded JSON text.
    public func serializedData() -> Data {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        write(to: &output)
        return Data(output)
    }

    /// Appends the compact JSON text of this value to `output`.
    ///
    /// - Parameter output: The buffer to append UTF-8 bytes to.
    public func write(to output: inout [UInt8]) {
        switch self {
        case .null:
            output.append(contentsOf: "null".utf8)
        case .bool(let bool):
            output.append(contentsOf: (bool ? "true" : "false").utf8)
        case .int(let int):
            output.append(contentsOf: String(int).utf8)
        case .double(let double):
            output.append(contentsOf: (double.isFinite ? double.description : "null").utf8)
        case .string(let string):
            Self.writeString(string, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                element.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(member.key, to: &output)
                output.append(UInt8(ascii: ":"))
                member.value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ string: String, to output: inout [UInt8]) {
        let written = string.utf8.withContiguousStorageIfAvailable { bytes in
            writeString(bytes: bytes, to: &output)
        }
        if written == nil {  // a string bridged from Objective-C: its bytes copied first
            Array(string.utf8).withUnsafeBufferPointer { bytes in writeString(bytes: bytes, to: &output) }
        }
    }

    /// Appends `bytes` (UTF-8) as a JSON string, quoted and escaped.
    private static func writeString(bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most strings need no escaping: copy them whole.
        if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            output.append(contentsOf: bytes)
            output.append(UInt8(ascii: "\""))
            return
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: "\\u00".utf8)
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0xF)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
