// The client SDK re-exports the wire model, so apps need only `import OfflineSync`.
@_exported public import SyncCore
