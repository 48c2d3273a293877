import Foundation
import Testing

@testable import OfflineSync

@Suite(.timeLimit(.minutes(3))) struct URLSessionTransportTests {
    /// Cancelling requests just as their replies complete must neither deadlock nor crash the process. With
    /// FoundationNetworking's `URLSession.data(for:)` it deadlocked (swift-corelibs-foundation #5412: the cancelling
    /// thread holds the Swift task's lock while it waits for the session's queue, which waits for that lock to
    /// resume the task) — a CI run hung 14 minutes in four pull tests, and this test hung in 2 runs of 3; with
    /// `URLSessionTask.cancel()` sent from another queue, a CI run crashed in it ("a task that is not in the
    /// registry"). Here, rounds of 100 requests to a port nothing listens on (each fails at once) are cancelled
    /// 0.1 ms after they start; every request ends, cancelled or unreachable.
    @Test(.timeLimit(.minutes(1))) func cancellingRequestsAsTheyFailDoesNotDeadlock() async throws {
        let transport = URLSessionTransport()
        let url = try #require(URL(string: "http://127.0.0.1:1/tables/TodoItem"))
        for _ in 0..<30 {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        do {
                            _ = try await transport.send(HTTPRequestData(method: "GET", url: url))
                            Issue.record("nothing listens on port 1, yet a request was answered")
                        } catch let error as TransportError {
                            #expect([.cancelled, .unreachable].contains(error.code), "\(error)")
                        } catch {
                            Issue.record("not a TransportError: \(error)")
                        }
                    }
                }
                try? await Task.sleep(for: .microseconds(100))
                group.cancelAll()
            }
        }
    }
}
