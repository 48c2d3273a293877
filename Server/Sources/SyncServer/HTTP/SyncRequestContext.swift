public import Hummingbird
import NIOCore
import SyncOData

/// The per-request context of the sync server's routes.
public struct SyncRequestContext: RequestContext {
    /// Hummingbird's storage for the context (logger, parameters, coders, request id).
    public var coreContext: CoreRequestContextStorage
    /// Who called, when the request carried a valid token (see ``AuthConfiguration``); nil otherwise.
    public var caller: Caller?
    /// The protocol the request speaks, from its `ZUMO-API-VERSION` (``APIVersionMiddleware``): v2 unless it
    /// asked for 3.0.x.
    var dialect = ODataDialect.v2
    /// The client's address (the balancer's, behind one), or nil when the connection has none: the caller of a
    /// request without a token, for ``FairShares`` (its text is made only for such a request).
    let remoteAddress: SocketAddress?

    /// Creates the context of a request.
    ///
    /// - Parameter source: Where the request came from.
    public init(source: Source) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

extension SyncRequestContext {
    /// The table call a route's request makes: its caller, the path's table and item, its logger and dialect.
    var call: TableCall {
        TableCall(
            caller: caller, table: parameters.get("name") ?? "", item: parameters.get("id"), logger: logger,
            dialect: dialect)
    }
}
