/// Opens once: what waits on it goes on when the tables are ready (services that start before the store is
/// prepared, as ``CommitDelivery`` and ``AttachmentCollector``).
struct ReadyGate: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream(of: Void.self) }

    /// Opens the gate (once is enough; again does nothing).
    func open() {
        continuation.yield()
        continuation.finish()
    }

    /// Waits until the gate is open, or the task is cancelled.
    func wait() async {
        for await _ in stream { break }
    }
}
