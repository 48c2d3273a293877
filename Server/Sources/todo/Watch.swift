import ArgumentParser
import Foundation
import OfflineSync

/// `todo watch`: the list, redrawn whenever it or the sync status changes, while the client syncs by itself.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the list live while syncing automatically (Ctrl-C ends).",
        discussion: """
            Local changes are pushed within a moment, and the server is asked for changes every --interval seconds. \
            On a terminal each change redraws the screen; otherwise each frame is printed after a blank line.
            """)
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Include completed items.") var all = false
    @Option(help: "Seconds between pulls.") var interval = 2.0

    func validate() throws {
        guard interval >= 0.1, interval <= 3600 else { throw ValidationError("--interval is 0.1 to 3600 seconds") }
    }

    func run() async throws {
        try await perform(options) { app in
            var sync = AutoSyncOptions()
            sync.pullInterval = .milliseconds(Int64(interval * 1000))
            sync.pushDelay = .milliseconds(300)
            let items = try app.items
            await app.client.startSyncing(pulling: [items.autoPull(queryID: TodoApp.queryID)], options: sync)
            let ordered = TableQuery<TodoItem>().orderBy(\.text)
            let query = all ? ordered : ordered.filter { $0.complete == false }
            let client = app.client
            let screen = Screen(serverURL: app.serverURL, all: all)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { for try await list in items.observe(query) { await screen.show(list) } }
                group.addTask { for await status in client.status() { await screen.show(status) } }
                try await group.next()
                group.cancelAll()
            }
            await app.client.stopSyncing()
        }
    }
}

/// What `todo watch` shows: the items and a status line, drawn again when either changes.
actor Screen {
    private var items: [TodoItem]?
    private var status = SyncStatus()
    private let serverURL: String
    private let all: Bool
    private let clock = DateFormatter()

    init(serverURL: String, all: Bool) {
        self.serverURL = serverURL
        self.all = all
        clock.dateFormat = "HH:mm:ss"
    }

    func show(_ items: [TodoItem]) {
        self.items = items
        draw()
    }

    func show(_ status: SyncStatus) {
        self.status = status
        draw()
    }

    private func draw() {
        guard let items else { return }
        var lines = ["\(all ? "All items" : "Open items") — \(serverURL)", statusLine(), ""]
        if items.isEmpty { lines.append(all ? "No items." : "No open items.") }
        for item in items { lines.append("\(TodoApp.short(item.id))  \(item.complete ? "✓" : " ")  \(item.text)") }
        let frame = lines.joined(separator: "\n") + "\n"
        // Written at once, unbuffered: a pipe (a test, `tee`) sees each frame as it is drawn.
        FileHandle.standardOutput.write(Data((Output.isTerminal ? "\u{1B}[H\u{1B}[2J" + frame : "\n" + frame).utf8))
    }

    /// `pending 0 · conflicts 0 · synced 12:03:04`, with what runs or went wrong.
    private func statusLine() -> String {
        var parts = ["pending \(status.pendingCount)", "conflicts \(status.conflictCount)"]
        if status.refusedCount > 0 { parts.append("refused \(status.refusedCount)") }
        parts.append(status.lastSyncedAt.map { "synced \(clock.string(from: $0))" } ?? "not synced yet")
        if status.isSyncing { parts.append("syncing…") }
        switch status.lastError {
        case .unavailable?: parts.append("offline: changes wait")
        case .unauthorized?: parts.append("signed out: sign in again")
        case .failed(let reason)?: parts.append(reason)
        case nil: break
        }
        return parts.joined(separator: " · ")
    }
}
