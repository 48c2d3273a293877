import Dispatch

/// Runs blocking work — a synchronous library call, a file read — on a Dispatch thread, never on one of Swift's
/// cooperative threads: the test suites and the in-process servers share that pool (two threads on a 2-core machine),
/// and one test blocking a thread for seconds starved every other. This is the one place of the test support where
/// blocking is allowed (`.ci/no-blocking` checks the rest).
public func offCooperativeThreads<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
