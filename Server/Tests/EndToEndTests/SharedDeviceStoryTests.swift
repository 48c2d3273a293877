import Foundation
import SyncCore
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Issue 29's story with the real `todo` and `sync-server` processes: one device (one store), a server that checks
/// tokens with a per-user `TodoItem`, and two people taking turns. Bob's token never sends Alice's pending change,
/// never shows her rows, and Alice's sign-out leaves no byte of her data in the store's folder.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SharedDeviceStoryTests {
    // A hang guard: each case took up to about 2 minutes in the whole suite on two cores (2026-11-28).
    @Test(.timeLimit(.minutes(3)), arguments: ["v2", "v3"])
    func oneDeviceTwoPeopleNothingCrosses(protocol: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "todo-shared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = "shared-device-secret-0123456789abcdef"
        let config = directory.appendingPathComponent("server.json")
        try #"{"auth": {"hs256Secret": "\#(secret)"}, "tables": [{"name": "TodoItem", "perUser": true}]}"#
            .write(to: config, atomically: true, encoding: .utf8)
        let port = try freePort()
        try await withServerProcess(
            port: port, database: "sqlite:" + directory.appendingPathComponent("server.sqlite").path,
            options: ["--config", config.path]
        ) { _ in
            let (alice, bob) = (
                try await developmentToken("alice", secret: secret), try await developmentToken("bob", secret: secret)
            )
            let storeFolder = directory.appendingPathComponent("device")
            let device = TutorialStoryTests.Device(environment: [
                "TODO_STORE": storeFolder.appendingPathComponent("todo.sqlite").path,
                "TODO_URL": "http://127.0.0.1:\(port)",
                "TODO_PROTOCOL": `protocol`,
            ])
            /// The texts of the server's rows that `token`'s user sees.
            func serverTexts(_ token: String) async throws -> Set<String> {
                var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/tables/TodoItem")!)
                request.setValue("2.0.0", forHTTPHeaderField: "ZUMO-API-VERSION")
                request.setValue(token, forHTTPHeaderField: "X-ZUMO-AUTH")
                let (data, _) = try await URLSession.shared.data(for: request)
                return Set(try JSONValue(parsing: data).arrayValue?.compactMap { $0["text"]?.stringValue } ?? [])
            }

            #expect(try await device.run("--token", alice, "add", "alice's diary").status == 0)
            #expect(try await device.run("--token", alice, "sync").output.contains("sent 1 change(s)"))
            #expect(try await device.run("--token", alice, "add", "alice offline").status == 0)

            // Bob's token on Alice's store: refused before anything is sent, by every command.
            let refusal =
                "todo: this store holds the data of alice, not of bob: run `todo signout` with alice's token to send "
                + "their changes and erase it, or `todo signout --discard` to erase it unsent (or use --store for a "
                + "store of your own)\n"
            for command in [["sync"], ["list", "--all"], ["push"], ["status"], ["add", "bob's"]] {
                let result = try await runProduct("todo", ["--token", bob] + command, environment: device.environment)
                #expect(result.status == 4, "\(command)")
                #expect(result.error == refusal, "\(command)")
                #expect(!result.output.contains("alice"), "\(command)")
            }
            let notHis = try await device.run("--token", bob, "signout")  // Alice's change cannot go with his token
            #expect(notHis.status == 4)
            #expect(try await serverTexts(bob).isEmpty)
            #expect(try await serverTexts(alice) == ["alice's diary"])

            // Alice signs out: her change is sent, then nothing of hers is left on the device.
            #expect(try await device.run("--token", alice, "status").output.contains("Account:    alice"))
            let signedOut = try await device.run("--token", alice, "signout")
            #expect(signedOut.status == 0)
            #expect(signedOut.output == "Signed out alice: this device holds none of its items any more.\n")
            #expect(try await serverTexts(alice) == ["alice's diary", "alice offline"])
            for name in try FileManager.default.contentsOfDirectory(atPath: storeFolder.path) {
                let data = try Data(contentsOf: storeFolder.appendingPathComponent(name))
                for text in ["alice", "diary", "offline"] { #expect(data.range(of: Data(text.utf8)) == nil, "\(name)") }
            }

            // Bob's turn: the store is his now.
            #expect(try await device.run("--token", bob, "status").output.contains("Account:    none yet"))
            #expect(try await device.run("--token", bob, "add", "bob's bike").status == 0)
            #expect(try await device.run("--token", bob, "sync").status == 0)
            #expect(try await device.run("--token", bob, "list", "--all").output.contains("bob's bike"))
            #expect(try await device.run("--token", alice, "list").status == 4)
            #expect(try await serverTexts(bob) == ["bob's bike"])

            // Bob leaves with a change unsent and discards it: erased, never sent.
            #expect(try await device.run("--token", bob, "add", "bob's draft").status == 0)
            #expect(try await device.run("signout", "--discard").status == 0)
            #expect(try await device.run("list", "--all").output == "No items.\n")
            #expect(try await serverTexts(bob) == ["bob's bike"])
            #expect(try await serverTexts(alice) == ["alice's diary", "alice offline"])
        }
    }
}
