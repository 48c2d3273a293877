import Foundation

/// The data protection class of an encrypted store's files on iOS, tvOS, watchOS and visionOS (Apple's `FileProtectionType`):
/// when the system itself keeps them unreadable. A second layer under the store's own encryption; ignored on other
/// platforms. A class that locks the files with the device (``complete``) stops background syncs while it is locked.
public enum StoreFileProtection: Sendable, Hashable {
    /// Readable only while the device is unlocked.
    case complete
    /// Files open when the device locks stay usable; new ones cannot be made while it is locked.
    case completeUnlessOpen
    /// Readable from the first unlock after a restart on (the system's usual default).
    case completeUntilFirstUserAuthentication
    /// No protection class (named so that it is not read as `Optional.none`).
    case noProtection

    /// Sets the class on the store's folder (new files inherit it) and on each of its files that exist.
    func apply(toStoreAt database: String) throws {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            let type: FileProtectionType =
                switch self {
                case .complete: .complete
                case .completeUnlessOpen: .completeUnlessOpen
                case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
                case .noProtection: .none
                }
            let manager = FileManager.default
            let folder = (database as NSString).deletingLastPathComponent
            let names = [database, database + "-wal", database + "-shm", database + "-key", database + ".attachments"]
            for path in [folder] + names where manager.fileExists(atPath: path) {
                try manager.setAttributes([.protectionKey: type], ofItemAtPath: path)
            }
        #endif
    }
}
