// The first five minutes: a complete SwiftUI to-do list that works offline and syncs when asked.
// Reads and writes go to the local store at once; `sync()` pushes the queued changes, then pulls.

import Foundation
import Observation
import OfflineSync

struct TodoItem: Codable, Sendable, Identifiable, Hashable {
    var id: String
    var text: String
    var complete: Bool
    var version: String?  // the server's version: keep it, it is how conflicts are detected
}

@available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
@MainActor @Observable
final class TodoModel {
    private(set) var items: [TodoItem] = []
    private(set) var status = ""
    private let client: SyncClient
    private let todos: SyncTable<TodoItem>

    /// Opens the store in Application Support; nothing is sent until `sync()`.
    init(serverURL: URL) throws {
        client = SyncClient(url: serverURL, store: try SQLiteLocalStore(named: "todo"))
        todos = try client.syncTable("TodoItem", of: TodoItem.self)
    }

    func load() async {
        do {
            items = try await todos.items(matching: TableQuery().filter { $0.complete == false }.orderBy(\.text))
        } catch {
            status = error.localizedDescription
        }
    }

    func add(_ text: String) async {
        await change { try await $0.insert(TodoItem(id: UUID().uuidString, text: text, complete: false)) }
    }

    func complete(_ item: TodoItem) async {
        var done = item
        done.complete = true
        await change { try await $0.update(done) }
    }

    func delete(_ item: TodoItem) async {
        await change { try await $0.delete(item) }
    }

    /// Pushes every pending change, then pulls the server's changes since the last sync.
    func sync() async {
        do {
            let summary = try await todos.pull(queryID: "allTodoItems")
            status = "Synced: \(summary.appliedCount) change(s) from the server"
        } catch let error as PullError {
            status = error.localizedDescription  // offline, unauthorized, a conflict: the changes stay queued
        } catch {
            status = error.localizedDescription
        }
        await load()
    }

    private func change(_ write: (SyncTable<TodoItem>) async throws -> some Sendable) async {
        do {
            _ = try await write(todos)
        } catch {
            status = error.localizedDescription
        }
        await load()
    }
}

#if canImport(SwiftUI)
    import SwiftUI

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
    struct TodoListView: View {
        @State var model: TodoModel
        @State private var newText = ""

        var body: some View {
            NavigationStack {
                List {
                    TextField("New item", text: $newText)
                        .onSubmit {
                            let text = newText
                            newText = ""
                            Task { await model.add(text) }
                        }
                    ForEach(model.items) { item in
                        Button(item.text) { Task { await model.complete(item) } }
                    }
                    .onDelete { offsets in
                        let gone = offsets.map { model.items[$0] }
                        Task { for item in gone { await model.delete(item) } }
                    }
                }
                .navigationTitle("To do")
                .toolbar { Button("Sync") { Task { await model.sync() } } }
                .safeAreaInset(edge: .bottom) { Text(model.status).font(.footnote) }
                .task { await model.load() }
                .refreshable { await model.sync() }
            }
        }
    }

// In an app: `WindowGroup { TodoListView(model: try! TodoModel(serverURL: url)) }`, or show the error.
#endif
// snippet.hide
// Compiled with the package (`swift build`), on every platform; the view above only where SwiftUI exists.
