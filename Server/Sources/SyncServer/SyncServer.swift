// The server library re-exports the wire model it serves.
@_exported public import SyncCore
@_exported public import SyncOData
