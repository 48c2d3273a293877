public import Foundation

/// A point in time as the protocol writes it: `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` (PROTOCOL.md §9).
///
/// A `WireDate` holds whole milliseconds since 1970 (UTC), so that formatting and parsing are exact
/// and dates compare and sort as the server stores them. Parsing accepts 0–7 fraction digits and
/// `Z` or a `±hh:mm` offset; digits past the millisecond are truncated.
///
/// For example:
/// ```swift
/// let date = WireDate(parsing: "2012-05-21T00:00:29.3+02:00")!
/// date.description                         // "2012-05-20T22:00:29.300Z"
/// ```
public struct WireDate: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var millisecondsSince1970: Int64

    /// Creates a date from milliseconds since 1970 (UTC).
    ///
    /// - Parameter millisecondsSince1970: The instant, in milliseconds.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// Creates a date from a `Date`, truncated to the millisecond.
    ///
    /// - Parameter date: The instant.
    public init(_ date: Date) {
        // Round to the microsecond first so that binary noise (29.3 stored as 29.29999…) is not truncated.
        let microseconds = (date.timeIntervalSince1970 * 1_000_000).rounded()
        millisecondsSince1970 = Int64((microseconds / 1000).rounded(.down))
    }

    /// The instant as a `Date`.
    public var date: Date {
        Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000)
    }

    /// The wire form: `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`.
    public var description: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        write(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the wire form (``description``, without quotes) to `output`: written digit by digit, as this
    /// runs for every date of every row a server returns.
    ///
    /// - Parameter output: The buffer to append UTF-8 bytes to.
    public func write(to output: inout [UInt8]) {
        let milliseconds = Int(millisecondsSince1970.modulo(1000))
        let seconds = millisecondsSince1970.floorDivided(by: 1000)
        let days = seconds.floorDivided(by: 86_400)
        let secondOfDay = Int(seconds.modulo(86_400))
        let (year, month, day) = Self.civil(fromDays: days)
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var rest = value
            if rest >= divisor * 10 {  // a year past 9999: every digit
                output.append(contentsOf: String(value).utf8)
                return
            }
            while divisor > 0 {
                output.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        if year < 0 { output.append(UInt8(ascii: "-")) }
        digits(Int(abs(year)), 4)
        output.append(UInt8(ascii: "-"))
        digits(month, 2)
        output.append(UInt8(ascii: "-"))
        digits(day, 2)
        output.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        output.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        output.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        output.append(UInt8(ascii: "."))
        digits(milliseconds, 3)
        output.append(UInt8(ascii: "Z"))
    }

    /// Parses a wire date: `yyyy-MM-ddTHH:mm:ss`, an optional fraction of 1–7 digits, then `Z` or
    /// `±hh:mm`. Returns nil for anything else, including impossible dates such as February 30.
    ///
    /// - Parameter text: The date's text.
    public init?(parsing text: String) {
        var scanner = DigitScanner(text)
        guard let year = scanner.number(digits: 4), scanner.skip("-"),
            let month = scanner.number(digits: 2), scanner.skip("-"),
            let day = scanner.number(digits: 2), scanner.skip("T"),
            let hour = scanner.number(digits: 2), scanner.skip(":"),
            let minute = scanner.number(digits: 2), scanner.skip(":"),
            let second = scanner.number(digits: 2)
        else { return nil }
        guard (1...12).contains(month), (1...Self.daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var milliseconds = 0
        if scanner.skip(".") {
            var digits = 0
            while let digit = scanner.digit() {
                digits += 1
                if digits <= 3 { milliseconds = milliseconds * 10 + digit }
            }
            guard (1...7).contains(digits) else { return nil }
            if digits < 3 { for _ in digits..<3 { milliseconds *= 10 } }
        }
        var offsetMinutes = 0
        if scanner.skip("Z") {
        } else if let sign = scanner.sign(), let offsetHour = scanner.number(digits: 2), scanner.skip(":"),
            let offsetMinute = scanner.number(digits: 2), offsetHour < 24, offsetMinute < 60
        {
            offsetMinutes = sign * (offsetHour * 60 + offsetMinute)
        } else {
            return nil
        }
        guard scanner.isAtEnd else { return nil }
        let days = Self.days(fromCivilYear: Int64(year), month: month, day: day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        millisecondsSince1970 = seconds * 1000 + Int64(milliseconds)
    }

    /// Orders dates by instant.
    public static func < (lhs: WireDate, rhs: WireDate) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// Decodes a date from its wire string.
    ///
    /// - Parameter decoder: The decoder to read from.
    /// - Throws: `DecodingError.dataCorrupted` when the string is not a wire date.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let date = WireDate(parsing: try container.decode(String.self)) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a wire date")
        }
        self = date
    }

    /// Encodes the date as its wire string.
    ///
    /// - Parameter encoder: The encoder to write to.
    /// - Throws: Whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    // MARK: Calendar arithmetic (proleptic Gregorian, after H. Hinnant's days_from_civil)

    static func days(fromCivilYear year: Int64, month: Int, day: Int) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDivided(by: 400)
        let yearOfEra = y - era * 400
        let monthIndex = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * monthIndex + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civil(fromDays days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        let month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

}

/// Reads fixed-width ASCII digits and separators from a string.
struct DigitScanner {
    private let bytes: [UInt8]
    private var index = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    var isAtEnd: Bool { index == bytes.count }

    mutating func digit() -> Int? {
        guard index < bytes.count, bytes[index].isASCIIDigit else { return nil }
        defer { index += 1 }
        return Int(bytes[index] - UInt8(ascii: "0"))
    }

    mutating func number(digits: Int) -> Int? {
        var value = 0
        for _ in 0..<digits {
            guard let digit = digit() else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard index < bytes.count, bytes[index] == UInt8(ascii: character) else { return false }
        index += 1
        return true
    }

    mutating func sign() -> Int? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }
}

extension Int64 {
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }

    func modulo(_ divisor: Int64) -> Int64 {
        self - floorDivided(by: divisor) * divisor
    }
}
