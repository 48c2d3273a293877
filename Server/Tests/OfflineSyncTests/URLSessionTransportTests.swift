import Foundation
import Testing

@testable import OfflineSync

@Suite struct URLSessionTransportTests {
    /// Cancelling requests just as their replies complete must not deadlock the process. FoundationNetworking's
    /// `URLSession.data(for:)` does (swift-corelibs-foundation #5412): the cancelling thread holds the Swift task's
    /// lock while it waits for the session's queue, and the session's queue waits for that lock to resume the task.
    /// A CI run hung 14 minutes in four pull tests that way. Here, rounds of 100 requests to a port nothing listens
    /// on (each fails at once) are cancelled 0.1 ms after they start; every request ends, cancelled or unreachable.
    /// Before the fix the test process hung within a few rounds.
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
