import Logging
import ServiceLifecycle

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

extension ReadyGate {
    /// Once the gate opens, runs `work` every `interval` (from the end of one run to the start of the next) until
    /// graceful shutdown or cancellation; a run that throws is logged as `what` failed, and tried again next time.
    func repeating(
        every interval: Duration, logger: Logger, _ what: String, _ work: @escaping @Sendable () async throws -> Void
    )
        async
    {
        await cancelWhenGracefulShutdown {
            await self.wait()
            while !Task.isCancelled {
                do {
                    try await work()
                } catch {
                    logger.warning("\(what) failed (tried again later): \(error)")
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
