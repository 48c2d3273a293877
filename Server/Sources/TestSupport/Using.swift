/// Runs `body` with `resource`, then `release` however `body` ends: the async `defer` the scoped helpers
/// (``withServerProcess(port:database:options:product:environment:_:)``, ``withLocalPostgres(_:)``) need.
func using<Resource, T>(
    _ resource: Resource, _ body: (Resource) async throws -> T, release: (Resource) async -> Void
) async throws -> T {
    do {
        let result = try await body(resource)
        await release(resource)
        return result
    } catch {
        await release(resource)
        throw error
    }
}
