/// What a write does to a row, whatever route or dialect spells it (v2 `POST`/`PATCH`/`DELETE`/undelete, v3 `PUT`
/// and `DELETE`, an operation of `/batch`): the effect, not the route, decides which access rule holds and which hook
/// runs. A v3 replace with `deleted: true` is a change and a delete; one that brings a tombstone back is a change and
/// an undelete.
///
/// | effect | access rule (``TableOperation``) | hook (``TableWrite/Kind``) |
/// |---|---|---|
/// | insert | insert | insert |
/// | change | update | update |
/// | delete | delete | delete |
/// | undelete | update | undelete |
enum WriteEffect: Sendable, CaseIterable {
    case insert, change, delete, undelete

    /// The access rule that holds for the effect.
    var operation: TableOperation {
        switch self {
        case .insert: .insert
        case .change, .undelete: .update
        case .delete: .delete
        }
    }

    /// The hook that runs for the effect.
    var hook: TableWrite.Kind {
        switch self {
        case .insert: .insert
        case .change: .update
        case .delete: .delete
        case .undelete: .undelete
        }
    }

    /// Whether a request of the effect carries fields (an insert's or a change's body).
    var readsFields: Bool { self == .insert || self == .change }
}
