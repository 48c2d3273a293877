import Foundation
public import SyncCore

extension ODataQuery {
    /// The query as a URL query string, without the leading `?`, options in a fixed order
    /// (`$filter`, `$orderby`, `$skip`, `$top`, `$select`, `$inlinecount`, `__includeDeleted`) and
    /// values percent-encoded (space as `%20`; `'(),` left as they are).
    ///
    /// For example `$filter=(name%20eq%20'bob')&$top=0&$inlinecount=allpages`.
    public var queryString: String { queryString(dialect: .v2) }

    /// The query as a URL query string in `dialect`: under ``ODataDialect/v3``, `$count=true`,
    /// `__includedeleted=true` and dates as `cast(…,Edm.DateTimeOffset)`.
    public func queryString(dialect: ODataDialect) -> String {
        queryItems(dialect: dialect).map { "\($0.name)=\(Self.percentEncode($0.value))" }.joined(separator: "&")
    }

    /// The query's options as name–value pairs, not yet percent-encoded, in ``queryString``'s order.
    public var queryItems: [(name: String, value: String)] { queryItems(dialect: .v2) }

    /// The query's options in `dialect` as name–value pairs, not yet percent-encoded.
    public func queryItems(dialect: ODataDialect) -> [(name: String, value: String)] {
        var items: [(name: String, value: String)] = []
        if let filter { items.append(("$filter", filter.odataText(dialect: dialect))) }
        if !orderBy.isEmpty { items.append(("$orderby", orderBy.map(\.odataText).joined(separator: ","))) }
        if let skip { items.append(("$skip", String(skip))) }
        if let top { items.append(("$top", String(top))) }
        if let select { items.append(("$select", select.joined(separator: ","))) }
        switch dialect {
        case .v2:
            if includeTotalCount { items.append(("$inlinecount", "allpages")) }
            if includeDeleted { items.append(("__includeDeleted", "true")) }
        case .v3:
            if includeTotalCount { items.append(("$count", "true")) }
            if includeDeleted { items.append(("__includedeleted", "true")) }
        }
        return items
    }

    /// Reads the query options from a URL query string (with or without the leading `?`).
    ///
    /// Percent-escapes are decoded (a `+` stays a `+`, as RFC 3986 says). A repeated option and any malformed
    /// value are errors; `__includeDeleted` is matched case-insensitively and must be `true` or `false`; other
    /// parameters are ignored. Under ``ODataDialect/v2`` unknown `$` options are errors; under
    /// ``ODataDialect/v3`` option names are case-insensitive, `$count` (`true` or `false`) asks for the count,
    /// and other `$` options (`$inlinecount` among them) are ignored, as OData v4 servers do.
    /// - Parameters:
    ///   - queryString: The URL's query component.
    ///   - dialect: The protocol the request speaks; v2 by default.
    /// - Throws: ``ODataError`` naming the option and what is wrong with it.
    public init(parsing queryString: String, dialect: ODataDialect = .v2) throws(ODataError) {
        self.init()
        var seen: Set<String> = []
        var text = Substring(queryString).utf8
        if text.first == UInt8(ascii: "?") { text = text.dropFirst() }
        // Split and decided on UTF-8 bytes, and each decoded part checked to be stream-safe (``ClientText``) before
        // it is hashed or compared: a `Character` of a long run of combining marks costs time quadratic in its length.
        for pair in text.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let rawName = String(decoding: pair[..<(equals ?? pair.endIndex)], as: UTF8.self)
            guard let name = Self.percentDecode(rawName) else {
                throw ODataError("invalid percent-encoding in a parameter name")
            }
            let rawValue = equals.map { String(decoding: pair[pair.index(after: $0)...], as: UTF8.self) } ?? ""
            let isOption =
                name.utf8.first == UInt8(ascii: "$") || name.utf8.count == 16 && name.lowercased() == "__includedeleted"
            guard isOption else { continue }
            guard name.utf8.allSatisfy({ $0 < 0x80 }) else { throw ODataError("unknown query option", option: name) }
            let key = name.lowercased() == "__includedeleted" || dialect == .v3 ? name.lowercased() : name
            if dialect == .v3, !Self.v3Options.contains(key) { continue }
            guard seen.insert(key).inserted else { throw ODataError("option given more than once", option: name) }
            guard let value = Self.percentDecode(rawValue) else {
                throw ODataError("invalid percent-encoding", option: name)
            }
            guard ClientText.isStreamSafe(value) else {
                throw ODataError(
                    "more than \(ClientText.maximumNonStarterRun) combining marks in a row", option: name)
            }
            try apply(key, value: value, name: name, dialect: dialect)
        }
    }

    /// The options a v3 request may give; others are ignored.
    private static let v3Options: Set<String> = [
        "$filter", "$orderby", "$skip", "$top", "$select", "$count", "__includedeleted",
    ]

    private mutating func apply(_ key: String, value: String, name: String, dialect: ODataDialect)
        throws(ODataError)
    {
        switch key {
        case "$filter":
            do { filter = try ODataExpression(parsing: value, dialect: dialect) } catch { throw error.in(option: name) }
        case "$orderby":
            orderBy = try Self.parseOrderBy(value)
        case "$skip":
            skip = try Self.parseCount(value, option: name)
        case "$top":
            top = try Self.parseCount(value, option: name)
        case "$select":
            select = try Self.parseSelect(value)
        case "$count" where dialect == .v3:
            switch value.lowercased() {
            case "true": includeTotalCount = true
            case "false": includeTotalCount = false
            default: throw ODataError("expected 'true' or 'false'", option: name)
            }
        case "$inlinecount":
            switch value {
            case "allpages": includeTotalCount = true
            case "none": includeTotalCount = false
            default: throw ODataError("expected 'allpages' or 'none'", option: name)
            }
        case "__includedeleted":
            switch value.lowercased() {
            case "true": includeDeleted = true
            case "false": includeDeleted = false
            default: throw ODataError("expected 'true' or 'false'", option: name)
            }
        default:
            throw ODataError("unknown query option", option: name)
        }
    }

    private static func parseCount(_ value: String, option: String) throws(ODataError) -> Int {
        guard !value.isEmpty, value.utf8.allSatisfy(\.isASCIIDigit), let count = Int(value) else {
            throw ODataError("expected a whole number from 0 to \(Int.max)", option: option)
        }
        return count
    }

    private static func parseOrderBy(_ value: String) throws(ODataError) -> [ODataOrdering] {
        var orderings: [ODataOrdering] = []
        for part in value.split(separator: ",", omittingEmptySubsequences: false) {
            let words = part.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard let field = words.first, isMemberPath(field), words.count <= 2 else {
                throw ODataError("expected 'field', 'field asc' or 'field desc'", option: "$orderby")
            }
            var direction = ODataOrdering.Direction.ascending
            if words.count == 2 {
                guard let parsed = ODataOrdering.Direction(rawValue: words[1]) else {
                    throw ODataError("unknown direction '\(words[1])'", option: "$orderby")
                }
                direction = parsed
            }
            orderings.append(ODataOrdering(field, direction))
        }
        return orderings
    }

    private static func parseSelect(_ value: String) throws(ODataError) -> [String]? {
        let fields = value.split(separator: ",", omittingEmptySubsequences: false)
            .map { String($0).trimmingASCIIWhitespace() }
        if fields == ["*"] { return nil }
        for field in fields where !isMemberPath(field) {
            throw ODataError("'\(field)' is not a field name", option: "$select")
        }
        return fields
    }

    /// Whether `text` is a name, or names separated by `/`: each a letter or `_`, then letters,
    /// digits and `_` (ASCII).
    static func isMemberPath(_ text: String) -> Bool {
        let segments = text.split(separator: "/", omittingEmptySubsequences: false)
        return segments.allSatisfy { segment in
            guard let first = segment.utf8.first, first.isASCIILetter || first == UInt8(ascii: "_") else {
                return false
            }
            return segment.utf8.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == UInt8(ascii: "_") }
        }
    }

    // MARK: Percent-encoding

    private static let unescaped: Set<UInt8> = Set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~'()*!,$/".utf8)
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Percent-encodes a query value: everything but unreserved characters and `'()*!,$/`.
    ///
    /// - Parameter value: The raw value.
    /// - Returns: The encoded value.
    public static func percentEncode(_ value: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if unescaped.contains(byte) {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0xF)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Decodes `%XX` escapes; nil when an escape is malformed or the result is not UTF-8.
    ///
    /// - Parameter value: The encoded value.
    /// - Returns: The decoded value, or nil.
    public static func percentDecode(_ value: String) -> String? {
        guard value.utf8.contains(UInt8(ascii: "%")) else { return value }
        var bytes: [UInt8] = []
        var iterator = value.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
