#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The limits of the server's HTTP connections; a request past one is refused with a JSON error body
/// and its connection closed (each refusal counts in `sync_refusals{sync_reason}` on `/metrics`).
///
/// For example, a server behind a proxy that holds a few thousand connections:
/// ```swift
/// var configuration = SyncServerConfiguration()
/// configuration.connectionLimits.maxConnections = 4_000
/// configuration.connectionLimits.idleTimeout = .seconds(120)
/// ```
public struct ConnectionLimits: Sendable, Hashable {
    /// The most connections open at once; one more is answered 503 with `Retry-After: 1`, and past
    /// 128 more the server stops accepting until some close (so file descriptors never run out).
    /// Default: 10,000, or less when the process may open fewer files (its limit minus 512).
    public var maxConnections: Int
    /// How long a connection may wait, between requests, for the next one; then it is closed.
    /// Default 60 s.
    public var idleTimeout = Duration.seconds(60)
    /// How long a request's head (request line and headers) may take to arrive once it has begun; then
    /// 408. Default 10 s.
    public var headTimeout = Duration.seconds(10)
    /// How long a request's body may take to arrive after its head; then 408. Default 60 s (1 MiB at
    /// 0.2 Mbit/s).
    public var bodyTimeout = Duration.seconds(60)
    /// How long a client may take to read a response once the server begins to send it; then the connection is
    /// reset (what the kernel still holds of the response is dropped too) and counted in
    /// `sync_refusals{sync_reason="response_timeout"}`, so that a client that reads slowly or not at all holds no
    /// memory or connection for long. Default 120 s (an 8 MiB page, the largest, at 0.6 Mbit/s; compressed pages are about a tenth of that).
    public var responseTimeout = Duration.seconds(120)
    /// The longest request line (method, path and query); longer is a 414. Default 32 KiB.
    public var maxRequestLineLength = 32 * 1024
    /// The most bytes of header lines; more is a 431. Default 32 KiB.
    public var maxHeaderSize = 32 * 1024

    /// The defaults.
    public init() {
        maxConnections = Self.defaultMaxConnections()
    }

    /// 10,000, or the open-file limit minus 512 (for the listener, the database and the refusals' headroom).
    static func defaultMaxConnections() -> Int {
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < rlim_t(Int.max) else { return 10_000 }
        return max(16, min(10_000, Int(clamping: limit.rlim_cur) - 512))
    }
}
