import Foundation
import OfflineSync
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Errors keep what they wrap, and read as one line through `localizedDescription`.
@Suite(.timeLimit(.minutes(3))) struct ErrorWrappingTests {
    @Test func aTransportErrorKeepsTheURLErrorAndComparesWithoutIt() async throws {
        let url = try #require(URL(string: "http://127.0.0.1:1/tables/TodoItem"))
        let error = await #expect(throws: TransportError.self) {
            try await URLSessionTransport().send(HTTPRequestData(method: "GET", url: url))
        }
        #expect(error?.underlying is URLError)
        #expect(error == TransportError(.unreachable, host: "127.0.0.1:1"))
    }

    @Test func aStatusErrorReadsAsItsLine() {
        #expect(SyncStatusError.unauthorized.localizedDescription == SyncStatusError.unauthorized.description)
    }
}
