import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Blocking TCP on 127.0.0.1 only, for the proxy and the harness's own requests.
enum Socket {
    /// A listening socket on 127.0.0.1 and a free port.
    static func listener() throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ChaosError("socket: \(errno)") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0, listen(descriptor, 128) == 0 else { throw ChaosError("bind/listen: \(errno)") }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A free port on 127.0.0.1 (nothing listens on it when this returns).
    static func freePort() throws -> Int {
        let (descriptor, port) = try listener()
        close(descriptor)
        return port
    }

    /// A connected socket to 127.0.0.1:`port`, or nil when nothing listens there.
    static func connection(port: Int, timeout: Int = 15) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        setTimeout(descriptor, seconds: timeout)
        return descriptor
    }

    static func setTimeout(_ descriptor: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Writes all of `bytes`; false when the peer went away.
    @discardableResult
    static func write(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Reads one HTTP message: the head, then a `Content-Length` body (none for a response to a HEAD, `bodyless`); without
    /// a length, a request has no body and a response's body runs until the peer closes. Nil when the connection ends or
    /// times out before the message is complete.
    static func readMessage(_ descriptor: Int32, isRequest: Bool = false, bodyless: Bool = false) -> HTTPMessage? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var head: HTTPMessage?
        while true {
            if head == nil, let end = buffer.firstRange(of: Array("\r\n\r\n".utf8)) {
                head = HTTPMessage(head: Array(buffer[..<end.upperBound]))
                buffer.removeSubrange(..<end.upperBound)
            }
            // The answer to a HEAD (and a 204 or 304) has no body, whatever its Content-Length says.
            if let head, bodyless || [" 204 ", " 304 "].contains(where: head.startLine.contains) {
                return HTTPMessage(head: head.head)
            }
            if let head, let length = head.contentLength ?? (isRequest ? 0 : nil), buffer.count >= length {
                return HTTPMessage(head: head.head, body: Array(buffer.prefix(length)))
            }
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count <= 0 {
                guard let head else { return nil }
                // Closed: a message without a length ends here; one with a length is cut short.
                if let length = head.contentLength, buffer.count < length { return nil }
                return HTTPMessage(head: head.head, body: buffer)
            }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }
}

/// An HTTP/1.1 request or response as bytes.
struct HTTPMessage {
    var head: [UInt8]
    var body: [UInt8] = []

    var headText: String { String(decoding: head, as: UTF8.self) }

    /// The first line, such as `HTTP/1.1 200 OK` or `POST /tables/TodoItem HTTP/1.1`.
    var startLine: String { headText.components(separatedBy: "\r\n").first ?? "" }

    func header(_ name: String) -> String? {
        let prefix = name.lowercased() + ":"
        for line in headText.components(separatedBy: "\r\n").dropFirst() where line.lowercased().hasPrefix(prefix) {
            return line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    var contentLength: Int? { header("Content-Length").flatMap { Int($0) } }

    /// The same message with `Connection: close` (one request per connection through the proxy).
    func closingConnection() -> HTTPMessage {
        var lines = headText.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        lines.removeAll { $0.lowercased().hasPrefix("connection:") || $0.lowercased().hasPrefix("keep-alive:") }
        lines.append("Connection: close")
        return HTTPMessage(head: Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8), body: body)
    }

    var bytes: [UInt8] { head + body }
}

struct ChaosError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
