import Foundation

/// A value behind a lock, for small synchronous state shared between tasks (the client's and the server's; not API
/// for apps).
public final class Locked<Value>: @unchecked Sendable {  // @unchecked: every access goes through `lock`.
    private let lock = NSLock()
    private var value: Value

    /// A lock around `value`.
    public init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock; returns what it returns and rethrows what it throws.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
