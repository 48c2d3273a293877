import SyncSQLite

/// Runs `operation` in a task of its own and returns what it returns — or, once `limit` has passed,
/// calls `onTimeout` and throws `timeoutError` without waiting for the operation any longer. The
/// server's one deadline: a store's query timeout, a lease's wait for a connection and a lease's
/// wait for its reply all go through it.
///
/// When `limit` passes while `isExempt()` holds, the deadline no longer applies and the caller waits
/// for the operation (a lease that got its connection is bounded by a deadline of its own).
///
/// This is for work that may never end however it is cancelled: PostgresNIO writes a query to its
/// connection without a promise for the write, so a query sent while the database closes that
/// connection waits forever (seen when PostgreSQL stops under load). `onTimeout` should make the
/// abandoned operation's resources useless to others (close the connection); the operation's task
/// is cancelled and left to end when it can.
///
/// Cancelling the caller cancels the operation and still returns by `limit` at the latest (unless exempt).
func abandoning<T: Sendable>(
    after limit: Duration, unless isExempt: @escaping @Sendable () -> Bool = { false },
    throwing timeoutError: @escaping @Sendable () -> any Error,
    onTimeout: @escaping @Sendable () -> Void = {}, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let waiter = Locked<CheckedContinuation<T, any Error>?>(nil)
    let work = Locked<Task<Void, Never>?>(nil)
    /// The waiting caller, once: whichever of the operation and the timer comes first answers it.
    @Sendable func takeWaiter() -> CheckedContinuation<T, any Error>? {
        waiter.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            waiter.withLock { $0 = continuation }
            let timer = Task {
                guard (try? await Task.sleep(for: limit)) != nil, !isExempt(), let waiting = takeWaiter() else {
                    return
                }
                work.withLock { $0 }?.cancel()
                onTimeout()
                waiting.resume(throwing: timeoutError())
            }
            let task = Task {
                let result: Result<T, any Error>
                do { result = .success(try await operation()) } catch { result = .failure(error) }
                timer.cancel()
                takeWaiter()?.resume(with: result)
            }
            work.withLock { $0 = task }
        }
    } onCancel: {
        work.withLock { $0 }?.cancel()
    }
}
