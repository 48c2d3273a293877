/// When the web console (`/console`, docs/console.md) is served. It reads every table, across the users of
/// per-user tables, so it is never open to the world: with ``SyncServerConfiguration/auth`` it needs an
/// administrator (``AuthConfiguration/console``); without, it is on only where no one else can reach it.
public enum ConsoleMode: String, Sendable, Hashable, CaseIterable {
    /// With auth: on, for administrators. Without auth: on only when the server listens on a loopback address
    /// (`127.0.0.1`, `::1`, `localhost`). The default.
    case automatic = "auto"
    /// On, also without auth on another address (a trusted network; the server says so at startup).
    case enabled = "on"
    /// Off: `/console` is a 404.
    case disabled = "off"

    /// Whether the console is served by a server on `host`, with or without `auth`.
    func isOn(host: String, authenticates: Bool) -> Bool {
        switch self {
        case .disabled: false
        case .enabled: true
        case .automatic: authenticates || Self.isLoopback(host)
        }
    }

    /// Whether `host` is a loopback address.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }
}
