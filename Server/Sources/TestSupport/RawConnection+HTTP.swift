public import Foundation
public import SyncCore

/// What came back on a raw connection: the bytes, whether the server closed the connection, and how long it took.
public struct RawReply: Sendable {
    public let bytes: [UInt8]
    public let closed: Bool
    public let elapsed: Duration

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The first response's status.
    public var status: Int? {
        guard text.hasPrefix("HTTP/1.1 ") else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }

    /// The first response's body as JSON.
    public var json: JSONValue? {
        guard let range = text.range(of: "\r\n\r\n") else { return nil }
        let rest = text[range.upperBound...]
        return try? JSONValue(parsing: Data((rest.range(of: "HTTP/1.1 ").map { rest[..<$0.lowerBound] } ?? rest).utf8))
    }

    /// The bytes after the first response's head (all that arrived after it, when more responses followed).
    public var body: Data {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else { return Data() }
        return Data(bytes[(end + separator.count)...])
    }

    /// How many responses arrived.
    public var responses: Int { text.components(separatedBy: "HTTP/1.1 ").count - 1 }
}

extension RawReply: CustomStringConvertible {
    /// For a failed expectation: whether the server closed, after how long, and the first 300 bytes.
    public var description: String {
        "\(closed ? "closed" : "still open") after \(elapsed), \(bytes.count) bytes: \(text.prefix(300))"
    }
}

extension RawConnection {
    /// How long ``exchange(port:_:)`` and ``readAll(_:)`` wait for a byte before they give up on an answer. A hang
    /// guard, not a measure: in one CI whole-suite run on two cores (the test took 38 s there, under a second alone)
    /// `EdgeLimitTests.aChunkedPartCarriesNoMoreThanItsContentRange` read no byte of its 400 when this was 10 s. Every
    /// caller expects the server to answer and end the connection, so only a failure waits this long.
    public static let idleLimit = Duration.seconds(60)

    /// Connects to 127.0.0.1:`port`, sends `request` and reads until the server closes the connection or
    /// ``idleLimit`` passes without a byte.
    ///
    /// - Throws: When the connection is refused.
    public static func exchange(port: Int, _ request: String) async throws -> RawReply {
        let started = ContinuousClock.now
        let connection = try await RawConnection(port: port, sending: Array(request.utf8), timeout: idleLimit)
        let (bytes, closed) = await connection.receiveAll(timeout: Self.idleLimit)
        await connection.close()
        return RawReply(bytes: bytes, closed: closed, elapsed: started.duration(to: .now))
    }

    /// Sends `request` on this connection and reads until the server closes it or ``idleLimit`` passes without a byte.
    public func readAll(_ request: String) async -> RawReply {
        let started = ContinuousClock.now
        startReceivingAll(timeout: Self.idleLimit)  // reading from the first byte of the answer, on the event loop
        await send(request)
        let (bytes, closed) = await receiveAll(timeout: Self.idleLimit)
        return RawReply(bytes: bytes, closed: closed, elapsed: started.duration(to: .now))
    }

    /// Sends `request` and reads the status of its answer, leaving the connection open (keep-alive).
    public func firstStatus(_ request: String) async -> Int? {
        await send(request)
        return RawReply(bytes: await receiveHead(timeout: Self.idleLimit), closed: false, elapsed: .zero).status
    }

    /// Sends `request`, then reads its answer 1 KB a second until the server ends the connection or `limit` passes.
    ///
    /// - Returns: The bytes read, and whether the server ended the connection.
    public func readSlowly(_ request: String, limit: Duration) async -> (bytes: Int, closed: Bool) {
        await send(request)
        var total = 0
        let started = ContinuousClock.now
        while started.duration(to: .now) < limit {
            let chunk = await receive(upTo: 1024, timeout: .seconds(10))
            if chunk.isEmpty { return (total, serverClosed) }
            total += chunk.count
            try? await Task.sleep(for: .seconds(1))
        }
        return (total, false)
    }
}
