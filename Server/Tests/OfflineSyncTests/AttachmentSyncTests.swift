import Foundation
import OfflineSync
import OfflineSyncTesting
import SyncCore
import SyncSQLite
import SyncServer
import Testing

/// Files attached to rows, from device to server to device (issue 33), against a real server, in both dialects:
/// attached offline and shown at once, uploaded in parts before the row (once: the same bytes again send nothing),
/// resumed after a lost reply and after the client process is gone (a new client on the same store), downloaded on
/// demand and ahead of time, evicted past the cache limit (never a file waiting to go), removed with their rows, and
/// a file the server refuses for good parks only the change that names it.
/// One test at a time: megabytes through debug builds load two cores, and the whole suite has timed tests.
@Suite(.serialized, .onBothProtocols, .timeLimit(.minutes(3))) struct AttachmentSyncTests {
    struct Inspection: Codable, Sendable, Equatable {
        var id: String
        var title: String
        var photo: String?
        var version: String?
    }

    static func table() throws -> TableConfiguration {
        var table = try TableConfiguration(name: "Inspection")
        table.attachmentColumns = ["photo"]
        return table
    }

    /// `count` bytes of a fixed seed: a random block of 64 KiB, repeated (a debug build fills megabytes byte by byte in
    /// seconds, on a thread the whole suite shares).
    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var random = SplitMix64(seed: seed)
        let block = Data((0..<min(count, 1 << 16)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        var data = Data(capacity: count)
        while data.count < count { data.append(block.prefix(count - data.count)) }
        return data
    }

    /// A transport that counts requests and bytes sent, may be down, and may lose the reply of one request (the
    /// server did the work).
    final class Faulty: HTTPTransport, @unchecked Sendable {  // @unchecked: state behind locks.
        let isDown = Locked(false)
        let bytesSent = Locked(0)
        /// Each request sent: its method, path, `Content-Range` and what came back (counted by ``count(_:)``, and
        /// listed in a failure's message).
        let exchanges = Locked<[String]>([])
        /// Loses the reply of the request this predicate picks (once).
        let loseReply = Locked<(@Sendable (HTTPRequestData) -> Bool)?>(nil)
        /// Fails before sending the request this predicate picks, as a dead network.
        let cutBefore = Locked<(@Sendable (HTTPRequestData) -> Bool)?>(nil)
        let inner = URLSessionTransport()

        func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            let host = request.url.host ?? ""
            if isDown.withLock({ $0 }) { throw TransportError(.unreachable, host: host) }
            if let cut = cutBefore.withLock({ $0 }), cut(request) {
                throw TransportError(.unreachable, host: host)
            }
            bytesSent.withLock { $0 += request.body?.count ?? 0 }
            let sent =
                "\(request.method) \(request.url.path)" + (request.headers["Content-Range"].map { " \($0)" } ?? "")
            let response: HTTPResponseData
            do {
                response = try await inner.send(request)
            } catch {
                exchanges.withLock { $0.append("\(sent): \(error)") }
                throw error
            }
            exchanges.withLock { $0.append("\(sent): \(response.status)") }
            let lose = loseReply.withLock { lose -> Bool in
                guard let pick = lose, pick(request) else { return false }
                lose = nil
                return true
            }
            if lose { throw TransportError(.connectionLost, host: host) }
            return response
        }

        func count(_ method: String) -> Int { exchanges.withLock { $0.filter { $0.hasPrefix(method + " ") }.count } }
    }

    static func withServer(
        configure: @escaping @Sendable (inout SyncServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (URL, Workspace) async throws -> Void
    ) async throws {
        let workspace = try Workspace()
        try await LiveServer.run(in: workspace, tables: [try table()], configure: configure) { url in
            try await body(url, workspace)
        }
    }

    static func client(
        _ url: URL, _ workspace: Workspace, _ store: String, _ transport: Faulty,
        configure: (inout SyncClient.Configuration) -> Void = { _ in }
    ) async throws -> SyncClient {
        try await SyncClient.make(url, workspace: workspace, store: store) {
            $0.transport = transport
            $0.retryLimit = 2
            $0.attachmentChunkSize = 1 << 20
            configure(&$0)
        }
    }

    @Test func aFileAttachedOfflineArrivesOnceAndIntactOnAnotherDevice() async throws {
        try await Self.withServer { url, workspace in
            let transport = Faulty()
            transport.isDown.withLock { $0 = true }
            let phone = try await Self.client(url, workspace, "phone.sqlite", transport)
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            try await inspections.insert(Inspection(id: "i1", title: "Roof"))
            let photo = Self.bytes(5_000_000 + 123, seed: 1)
            let attachment = try await inspections.attach(photo, to: ItemID("i1"), field: "photo")
            #expect(attachment.size == photo.count)
            #expect(try await inspections.item(id: ItemID("i1"))?.photo == attachment.hash, "the row names it at once")
            let shown = try #require(try await inspections.file(for: ItemID("i1"), field: "photo"))
            #expect(try Data(contentsOf: shown) == photo, "shown offline, from the store's folder")
            await #expect(throws: PushError.self) { try await phone.push() }

            transport.isDown.withLock { $0 = false }
            try await phone.push()
            #expect(transport.count("PUT") == 5, "5 parts of 1 MiB")
            #expect(try await phone.pendingOperations().isEmpty)
            let sent = transport.bytesSent.withLock { $0 }

            // The same bytes on another row: the server holds them; only a HEAD asks.
            try await inspections.insert(Inspection(id: "i2", title: "Porch"))
            try await inspections.attach(photo, to: ItemID("i2"), field: "photo")
            try await phone.push()
            #expect(transport.count("PUT") == 5 && transport.bytesSent.withLock { $0 } - sent < 10_000)

            let tabletTransport = Faulty()
            let progress = Locked<[TransferProgress]>([])
            let tablet = try await Self.client(url, workspace, "tablet.sqlite", tabletTransport)
            let theirs = try tablet.syncTable("Inspection", of: Inspection.self)
            try await theirs.pull()
            let file = try #require(
                try await theirs.file(for: ItemID("i1"), field: "photo") { report in
                    progress.withLock { $0.append(report) }
                })
            #expect(try Data(contentsOf: file) == photo, "byte-exact on the other device")
            #expect(tabletTransport.count("GET") == 1 + 5, "one page, five parts")
            #expect(progress.withLock { $0.last }?.completedBytes == photo.count)
            #expect(progress.withLock { $0.last }?.completedFiles == 1)
            _ = try await theirs.file(for: ItemID("i2"), field: "photo")
            #expect(tabletTransport.count("GET") == 1 + 5, "the same file is not downloaded twice")
        }
    }

    @Test func anUploadCutByALostReplyOrADeadProcessResumesWithoutSendingAgainWhatArrived() async throws {
        try await Self.withServer { url, workspace in
            let photo = Self.bytes(6 << 20, seed: 2)
            let first = Faulty()
            // The reply of the second part is lost (the server kept it): its retry is told 409 and where the upload
            // is; the third part goes; then the network dies before the fourth, and the process with it.
            let puts = Locked(0)
            first.cutBefore.withLock {
                $0 = { request in
                    request.method == "PUT"
                        && puts.withLock {
                            $0 += 1; return $0 >= 5
                        }
                }
            }
            first.loseReply.withLock { $0 = { request in request.method == "PUT" && puts.withLock { $0 } == 2 } }
            let phone = try await Self.client(url, workspace, "phone.sqlite", first) { $0.retryLimit = 1 }
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            try await inspections.insert(Inspection(id: "i1", title: "Roof"))
            try await inspections.attach(photo, to: ItemID("i1"), field: "photo")
            await #expect(throws: PushError.self) { try await phone.push() }
            #expect(try await phone.pendingOperations().count == 1, "the row waits for its file")

            // The process is gone; another opens the same store and pushes.
            let second = Faulty()
            let again = try await Self.client(url, workspace, "phone.sqlite", second)
            try await again.push()
            #expect(first.bytesSent.withLock { $0 } == 4 << 20, "four parts went, one of them twice")
            let resent = first.bytesSent.withLock { $0 } + second.bytesSent.withLock { $0 } - photo.count
            #expect(resent <= (1 << 20) + 10_000, "the part whose reply was lost, and no more (\(resent) bytes)")
            #expect(second.count("PUT") == 3, "the new process goes on from the server's offset")
            #expect(try await again.pendingOperations().isEmpty)

            let reader = try await Self.client(url, workspace, "reader.sqlite", Faulty())
            let theirs = try reader.syncTable("Inspection", of: Inspection.self)
            try await theirs.pull()
            let file = try #require(try await theirs.file(for: ItemID("i1"), field: "photo"))
            #expect(try Data(contentsOf: file) == photo)
        }
    }

    /// The reply of the last part is lost: the server stored the file; the part sent again is answered as the end.
    /// (Found by `sync-bench --only attachments.resume`: it was answered 409 at offset 0, and the whole file went again.)
    @Test func theLastPartsLostReplySendsNothingMore() async throws {
        try await Self.withServer { url, workspace in
            let photo = Self.bytes(2_500_000, seed: 5)
            let transport = Faulty()
            transport.loseReply.withLock {
                $0 = { request in request.headers["Content-Range"]?.hasPrefix("bytes 2097152-") == true }
            }
            let phone = try await Self.client(url, workspace, "phone.sqlite", transport)
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            try await inspections.insert(Inspection(id: "i1", title: "Roof"))
            try await inspections.attach(photo, to: ItemID("i1"), field: "photo")
            try await phone.push()
            let exchanges = transport.exchanges.withLock { $0 }
            #expect(transport.count("PUT") == 4, "three parts, the last twice: \(exchanges)")
            #expect(transport.bytesSent.withLock { $0 } < photo.count + 500_000, "\(exchanges)")
            #expect(try await phone.pendingOperations().isEmpty)
        }
    }

    /// The server holds every byte of an upload but has not named the file: it died, or its caller gave up, while the
    /// hash was checked (a `HEAD` then says `Upload-Offset` = the size). The client sends the last part again, which
    /// finishes it, and only then the row. (Found by `sync-chaos --attachments` under load: the client took the offset
    /// for a stored file, the row was refused as naming a missing file, and the device met a conflict it never made, once
    /// losing an acknowledged add.) An empty file goes whole, as a range names at least one byte.
    @Test func anUploadHoldingEveryByteIsFinishedBeforeTheRowAndAnEmptyFileGoesToo() async throws {
        try await Self.withServer { url, workspace in
            let photo = Self.bytes(2_500_000, seed: 6)
            let transport = Faulty()
            let phone = try await Self.client(url, workspace, "phone.sqlite", transport)
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            try await inspections.insert(Inspection(id: "i1", title: "Roof"))
            let attachment = try await inspections.attach(photo, to: ItemID("i1"), field: "photo")
            // Every byte, through a part that declares one more: the server keeps them as an unfinished upload.
            let part = try await URLSessionTransport().send(
                HTTPRequestData(
                    method: "PUT", url: url.appendingPathComponent("tables/Inspection/attachments/\(attachment.hash)"),
                    headers: [
                        "ZUMO-API-VERSION": "2.0.0", "Content-Type": "application/octet-stream",
                        "Content-Range": "bytes 0-\(photo.count - 1)/\(photo.count + 1)",
                    ], body: photo))
            #expect(part.status == 204 && part.header("Upload-Offset") == "\(photo.count)")
            try await inspections.insert(Inspection(id: "i2", title: "Blank"))
            let empty = try await inspections.attach(Data(), to: ItemID("i2"), field: "photo")
            try await phone.push()
            #expect(try await phone.pendingOperations().isEmpty)
            #expect(transport.count("PUT") == 2, "the last part of the held upload, and the empty file")
            #expect(transport.bytesSent.withLock { $0 } < 1_100_000, "only the last part went again")

            let reader = try await Self.client(url, workspace, "reader.sqlite", Faulty())
            let theirs = try reader.syncTable("Inspection", of: Inspection.self)
            try await theirs.pull()
            let file = try #require(try await theirs.file(for: ItemID("i1"), field: "photo"))
            #expect(try Data(contentsOf: file) == photo)
            #expect(try await theirs.item(id: ItemID("i2"))?.photo == empty.hash)
            let none = try #require(try await theirs.file(for: ItemID("i2"), field: "photo"))
            #expect(try Data(contentsOf: none).isEmpty)
        }
    }

    /// A download cut after two of its five parts goes on from the third, once for two callers at once, and the file is
    /// checked whole.
    @Test func aDownloadCutMidwayResumesFromWhatArrived() async throws {
        try await Self.withServer { url, workspace in
            let photo = Self.bytes(5_000_000, seed: 6)
            let phone = try await Self.client(url, workspace, "phone.sqlite", Faulty())
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            try await inspections.insert(Inspection(id: "i1", title: "Roof"))
            try await inspections.attach(photo, to: ItemID("i1"), field: "photo")
            try await phone.push()

            let transport = Faulty()
            let tablet = try await Self.client(url, workspace, "tablet.sqlite", transport) { $0.retryLimit = 0 }
            let theirs = try tablet.syncTable("Inspection", of: Inspection.self)
            try await theirs.pull()
            let parts = Locked(0)
            transport.cutBefore.withLock {
                $0 = { request in
                    request.headers["Range"] != nil
                        && parts.withLock {
                            $0 += 1; return $0 == 3
                        }
                }
            }
            await #expect(throws: ServerUnavailableError.self) {
                try await theirs.file(for: ItemID("i1"), field: "photo")
            }
            let gets = transport.count("GET")
            // Two callers at once (a prefetch and a tap): one download, both get the file.
            async let first = theirs.file(for: ItemID("i1"), field: "photo")
            async let second = theirs.file(for: ItemID("i1"), field: "photo")
            let files = try await [first, second]
            for file in files { #expect(try Data(contentsOf: try #require(file)) == photo) }
            #expect(transport.count("GET") - gets == 3, "parts 3 to 5 only, once")
        }
    }

    @Test func aFileTheServerRefusesParksOnlyTheChangeThatNamesIt() async throws {
        try await Self.withServer(configure: { $0.attachments.maxSize = 1_000_000 }) { url, workspace in
            let transport = Faulty()
            let phone = try await Self.client(url, workspace, "phone.sqlite", transport)
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            try await inspections.insert(Inspection(id: "big", title: "Too large"))
            try await inspections.attach(Self.bytes(2_000_000, seed: 3), to: ItemID("big"), field: "photo")
            try await inspections.insert(Inspection(id: "small", title: "Fine"))
            try await inspections.attach(Self.bytes(1_000, seed: 4), to: ItemID("small"), field: "photo")
            try await inspections.insert(Inspection(id: "plain", title: "No file"))
            var failure: PushError?
            do { try await phone.push() } catch let error as PushError { failure = error }
            guard case .operationsFailed(let result) = try #require(failure) else {
                Issue.record("\(String(describing: failure))")
                return
            }
            #expect(result.errors.map(\.operation.itemID.rawValue) == ["big"])
            #expect(result.errors.first?.message?.contains("not on the server") == true)
            #expect(result.pushedCount == 2)
            #expect(
                transport.count("PUT") == 2,
                "the refused file is not sent again and again: once, then marked; \(transport.exchanges.withLock { $0 })"
            )
            _ = try? await phone.push()
            #expect(transport.count("PUT") == 2, "\(transport.exchanges.withLock { $0 })")
        }
    }

    @Test func theCacheEvictsDownloadedFilesButNeverOnesWaitingToGo() async throws {
        try await Self.withServer { url, workspace in
            let phone = try await Self.client(url, workspace, "phone.sqlite", Faulty())
            let inspections = try phone.syncTable("Inspection", of: Inspection.self)
            var photos: [Data] = []
            for index in 0..<3 {
                try await inspections.insert(Inspection(id: "i\(index)", title: "Room \(index)"))
                photos.append(Self.bytes(1_500_000, seed: 10 + UInt64(index)))
                try await inspections.attach(photos[index], to: ItemID("i\(index)"), field: "photo")
            }
            try await phone.push()

            let transport = Faulty()
            transport.isDown.withLock { $0 = false }
            let tablet = try await Self.client(url, workspace, "tablet.sqlite", transport) {
                $0.attachmentCacheLimit = 3_200_000
            }
            let theirs = try tablet.syncTable("Inspection", of: Inspection.self)
            try await theirs.pull()
            var urls: [URL] = []
            for index in 0..<3 {
                urls.append(try #require(try await theirs.file(for: ItemID("i\(index)"), field: "photo")))
            }
            #expect(!FileManager.default.fileExists(atPath: urls[0].path), "the least recently used went")
            #expect(urls[1...].allSatisfy { FileManager.default.fileExists(atPath: $0.path) })
            let gets = transport.count("GET")
            let back = try #require(try await theirs.file(for: ItemID("i0"), field: "photo"))
            #expect(try Data(contentsOf: back) == photos[0] && transport.count("GET") == gets + 2)

            // Offline, files waiting to go stay whatever the limit.
            transport.isDown.withLock { $0 = true }
            for index in 3..<6 {
                try await theirs.insert(Inspection(id: "i\(index)", title: "Room \(index)"))
                try await theirs.attach(
                    Self.bytes(1_500_000, seed: 10 + UInt64(index)), to: ItemID("i\(index)"), field: "photo")
            }
            for index in 3..<6 {
                let file = try #require(try await theirs.file(for: ItemID("i\(index)"), field: "photo"))
                #expect(FileManager.default.fileExists(atPath: file.path))
            }
        }
    }

    /// A phone that inserted the items i0 and i1, each with a photo of 300,000 bytes, and pushed them.
    static func phoneWithTwoPhotos(_ url: URL, _ workspace: Workspace, seed: UInt64) async throws -> (
        SyncClient, SyncTable<Inspection>
    ) {
        let phone = try await Self.client(url, workspace, "phone.sqlite", Faulty())
        let inspections = try phone.syncTable("Inspection", of: Inspection.self)
        for index in 0..<2 {
            try await inspections.insert(Inspection(id: "i\(index)", title: "Room \(index)"))
            try await inspections.attach(
                Self.bytes(300_000, seed: seed + UInt64(index)), to: ItemID("i\(index)"), field: "photo")
        }
        try await phone.push()
        return (phone, inspections)
    }

    @Test func filesOfDeletedAndPurgedRowsAreRemovedAndAPolicyDownloadsAhead() async throws {
        try await Self.withServer { url, workspace in
            let (phone, inspections) = try await Self.phoneWithTwoPhotos(url, workspace, seed: 20)

            let transport = Faulty()
            let progress = Locked<[TransferProgress]>([])
            let tablet = try await Self.client(url, workspace, "tablet.sqlite", transport) { configuration in
                configuration.onTransferProgress = { report in progress.withLock { $0.append(report) } }
            }
            let theirs = try tablet.syncTable(
                "Inspection", of: Inspection.self,
                attachments: AttachmentPolicy(fields: ["photo"], download: .afterPull))
            try await theirs.pull(queryID: "all")
            let gets = transport.count("GET")
            let urls = [
                try #require(try await theirs.file(for: ItemID("i0"), field: "photo")),
                try #require(try await theirs.file(for: ItemID("i1"), field: "photo")),
            ]
            #expect(transport.count("GET") == gets, "downloaded with the pull")
            #expect(progress.withLock { $0.filter { $0.direction == .download }.last?.completedFiles } == 2)

            try await inspections.delete(id: ItemID("i0"))
            try await phone.push()
            try await theirs.pull(queryID: "all")
            #expect(!FileManager.default.fileExists(atPath: urls[0].path), "its row is gone: so is the file")
            #expect(FileManager.default.fileExists(atPath: urls[1].path))
            try await theirs.purge()
            #expect(!FileManager.default.fileExists(atPath: urls[1].path), "purged")
            // On the phone, the deleted row's file went with the delete.
            let phoneFiles = try FileManager.default.contentsOfDirectory(
                atPath: workspace.path("phone.sqlite.attachments"))
            #expect(phoneFiles.count == 1)
        }
    }

    /// A policy's download ahead fetches what the rows a pull stored name (it reads those, not the whole table): a
    /// file a failure stopped is fetched after the next pull, even one that brings no row; then nothing is fetched
    /// again, and a row that comes again naming a file the device holds fetches nothing.
    @Test func aPolicyFetchesAheadWhatPullsStoredAndTriesAgainWhatAFailureStopped() async throws {
        try await Self.withServer { url, workspace in
            let (phone, inspections) = try await Self.phoneWithTwoPhotos(url, workspace, seed: 40)

            let transport = Faulty()
            let tablet = try await Self.client(url, workspace, "tablet.sqlite", transport) { $0.retryLimit = 0 }
            let theirs = try tablet.syncTable(
                "Inspection", of: Inspection.self,
                attachments: AttachmentPolicy(fields: ["photo"], download: .afterPull))
            let downloads = {
                transport.exchanges.withLock { $0.filter { $0.hasPrefix("GET ") && $0.contains("/attachments/") } }
            }
            transport.cutBefore.withLock { $0 = { $0.url.path.contains("/attachments/") } }
            await #expect(throws: (any Error).self) { try await theirs.pull(queryID: "all") }
            #expect(try await theirs.items().count == 2, "the rows are kept")
            transport.cutBefore.withLock { $0 = nil }
            try await theirs.pull(queryID: "all")
            #expect(downloads().count == 2, "\(downloads())")
            try await theirs.pull(queryID: "all")
            var item = try #require(try await inspections.item(id: ItemID("i1")))
            item.title = "Room 1, again"
            try await inspections.update(item)
            try await phone.push()
            try await theirs.pull(queryID: "all")
            #expect(try await theirs.item(id: ItemID("i1"))?.title == "Room 1, again")
            #expect(downloads().count == 2, "\(downloads())")
        }
    }

    /// A table that fetches ahead only from some pull on (an app's update sets the policy, or a store from before the
    /// list of files to fetch) goes through the rows it already held once, at that pull: their files come too.
    @Test func aPolicySetLaterFetchesTheFilesOfTheRowsTheTableAlreadyHeld() async throws {
        try await Self.withServer { url, workspace in
            _ = try await Self.phoneWithTwoPhotos(url, workspace, seed: 60)
            let transport = Faulty()
            let tablet = try await Self.client(url, workspace, "tablet.sqlite", transport)
            let downloads = {
                transport.exchanges.withLock { $0.filter { $0.hasPrefix("GET ") && $0.contains("/attachments/") } }
            }
            let onDemand = try tablet.syncTable(
                "Inspection", of: Inspection.self, attachments: AttachmentPolicy(fields: ["photo"], download: .onDemand)
            )
            try await onDemand.pull(queryID: "all")
            #expect(downloads().isEmpty)
            let ahead = try tablet.syncTable(
                "Inspection", of: Inspection.self,
                attachments: AttachmentPolicy(fields: ["photo"], download: .afterPull))
            try await ahead.pull(queryID: "all")
            #expect(downloads().count == 2, "\(downloads())")
            try await ahead.pull(queryID: "all")
            #expect(downloads().count == 2, "once")
        }
    }
}
