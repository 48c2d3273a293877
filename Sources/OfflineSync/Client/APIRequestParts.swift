/// The HTTP method of a custom API call (``SyncClient/invokeAPI(_:method:body:parameters:headers:)``): one of the
/// constants, or any method written as a string literal (`"PROPFIND"`). Its letters are sent in upper case; a method
/// that is not all ASCII letters is refused when the call is made (`ValueError`, nothing sent).
///
/// The SDK keeps its own small types here, not swift-http-types' `HTTPRequest.Method`, so that an app's dependency
/// graph stays GRDB and swift-log.
public struct APIMethod: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The method as written.
    public let rawValue: String

    /// A method; any text (it is checked when the call is made).
    ///
    /// - Parameter rawValue: The method, such as `GET`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A method written as a string literal.
    ///
    /// - Parameter value: The method, such as `"GET"`.
    public init(stringLiteral value: String) { self.init(rawValue: value) }

    /// `GET`.
    public static let get = APIMethod(rawValue: "GET")
    /// `POST`.
    public static let post = APIMethod(rawValue: "POST")
    /// `PUT`.
    public static let put = APIMethod(rawValue: "PUT")
    /// `PATCH`.
    public static let patch = APIMethod(rawValue: "PATCH")
    /// `DELETE`.
    public static let delete = APIMethod(rawValue: "DELETE")
    /// `HEAD`.
    public static let head = APIMethod(rawValue: "HEAD")
    /// `OPTIONS`.
    public static let options = APIMethod(rawValue: "OPTIONS")

    /// The method as sent: upper case.
    public var description: String { rawValue.uppercased() }

    /// Whether it may be sent again without a second effect (RFC 9110 §9.2.2): `GET`, `HEAD`, `PUT`, `DELETE` and
    /// `OPTIONS`. Only these are tried again after a transient failure.
    public var isRepeatable: Bool { ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"].contains(description) }
}

/// More header fields of a custom API call, written as a dictionary literal (`["X-Trace": "t1"]`). Names compare
/// without case, as HTTP's do: a field set again under another case replaces the first.
public struct APIHeaders: Hashable, Sendable, ExpressibleByDictionaryLiteral, Sequence {
    private var fields: [(name: String, value: String)] = []

    /// No fields.
    public init() {}

    /// Fields written as a dictionary literal; a name given twice keeps its last value.
    ///
    /// - Parameter elements: Names and values.
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { self[name] = value }
    }

    /// The value of the field `name` (any case), or nil; setting nil removes it.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.lowercased() == name.lowercased() }?.value }
        set {
            fields.removeAll { $0.name.lowercased() == name.lowercased() }
            if let newValue { fields.append((name, newValue)) }
        }
    }

    /// The fields in the order set.
    public func makeIterator() -> some IteratorProtocol<(name: String, value: String)> { fields.makeIterator() }

    /// Whether both hold the same fields in the same order, names compared without case.
    public static func == (lhs: APIHeaders, rhs: APIHeaders) -> Bool {
        lhs.fields.map { [$0.name.lowercased(), $0.value] } == rhs.fields.map { [$0.name.lowercased(), $0.value] }
    }

    /// Hashes the fields as ``==(_:_:)`` compares them.
    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name.lowercased())
            hasher.combine(field.value)
        }
    }

    /// The fields as the transport takes them.
    var dictionary: [String: String] { Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 }) }
}
