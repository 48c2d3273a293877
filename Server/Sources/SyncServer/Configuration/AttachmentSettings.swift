/// How the server keeps the files rows name (``TableConfiguration/attachmentColumns``, docs/attachments.md).
///
/// For example, files up to 1 GiB kept a week before an unnamed one is collected:
/// ```swift
/// var configuration = SyncServerConfiguration()
/// configuration.attachments.maxSize = 1 << 30
/// configuration.attachments.gracePeriod = .seconds(7 * 86_400)
/// ```
public struct AttachmentSettings: Sendable, Hashable {
    /// The directory of the files on the SQLite store; nil puts them beside the database file, in
    /// `<database file>.attachments`. (On PostgreSQL the files are in the database, shared by every instance.)
    public var directory: String?
    /// The largest file taken; an upload that declares more is refused, 413. Default 256 MiB.
    public var maxSize = 256 << 20
    /// How long a file no row names (one uploaded but not yet named, or one whose rows are gone) and an unfinished
    /// upload are kept before they are collected. Default 24 hours: a device that uploaded a file and lost its
    /// connection before its row went has that long to send the row without uploading again.
    public var gracePeriod = Duration.seconds(86_400)
    /// How often each instance collects. Default 1 hour.
    public var collectionInterval = Duration.seconds(3_600)
    /// The most unfinished uploads one uploader (a token's subject; every anonymous caller together) keeps at once;
    /// a new one past it is refused, 429, until one is finished or collected. Default 16.
    public var maxUnfinishedUploads = 16
    /// The most bytes one uploader's unfinished uploads may come to (each counted at its declared size, or at what it
    /// holds); an upload that would pass it is refused, 507. Default 1 GiB.
    public var maxUnfinishedBytes = 1 << 30

    /// The defaults.
    public init() {}
}
