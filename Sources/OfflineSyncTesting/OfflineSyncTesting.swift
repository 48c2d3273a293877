// Test doubles for apps that use OfflineSync.
@_exported public import OfflineSync
