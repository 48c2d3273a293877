#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A port on 127.0.0.1 that nothing listens on right now.
public func freePort() throws -> Int {
    let reservation = try PortReservation()
    reservation.release()
    return reservation.port
}

/// A port of 127.0.0.1 held by a bound socket that does not listen: a connection to it is refused at once (the
/// server is "down"), and no other server — another test's, started on port 0 — can take it meanwhile. A test that
/// leaves its server's port unused for a while reserves it, and releases it just before the server starts.
public final class PortReservation: @unchecked Sendable {  // @unchecked: `release()` is called by one owner.
    public let port: Int
    private var socket: Int32

    public init() throws {
        #if canImport(Glibc)
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socket >= 0 else { throw ProcessError("no socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            close(socket)
            throw ProcessError("bind failed")
        }
        self.socket = socket
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Lets the port go (once).
    public func release() {
        guard socket >= 0 else { return }
        close(socket)
        socket = -1
    }

    deinit { release() }
}
