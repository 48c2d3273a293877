// Test doubles for apps that use OfflineSync; they arrive with the client SDK.
@_exported public import OfflineSync
