import Foundation
import Registry
import RegistryApp
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `fcm-registry` run as a user runs it, in a folder of its own: files it creates, exit statuses,
/// and what it says on standard error.
@Suite("Command line", .enabled(if: ServeProcess.available), .timeLimit(.minutes(2)))
struct CommandLineTests {
    static let googleKey = "APA91bGHXQBB-ImportedFromGoogle_bfD2hB0DxDpo"

    // MARK: - Files for secrets

    @Test("project create --output writes the key into a new file of mode 0600, and refuses an existing one")
    func projectCreateOutput() async throws {
        let folder = try Folder()
        let key = folder.path("my-app.json")
        let created = try await folder.run([
            "project", "create", "--sender-id", "123", "--project-id", "my-app", "--output", key,
        ])
        #expect(created.status == 0)
        #expect(created.stdout.isEmpty)
        #expect(try Self.mode(of: key) == 0o600)
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: key))) as? [String: Any]
        #expect(file?["project_id"] as? String == "my-app")
        #expect((file?["server_key"] as? String)?.isEmpty == false)

        // An existing file is kept, and no project is created whose key would be lost.
        let again = try await folder.run([
            "project", "create", "--sender-id", "124", "--project-id", "other", "--output", key,
        ])
        #expect(again.status == 1)
        #expect(again.errorLines == ["Error: \(key) exists; --force replaces it"])
        #expect(try await folder.run(["project", "list"]).stdout.contains("other") == false)

        // --force replaces it, 0600 even when the old file was readable by all.
        chmod(key, 0o644)
        let forced = try await folder.run(
            ["project", "create", "--sender-id", "124", "--project-id", "other", "--output", key, "--force"])
        #expect(forced.status == 0)
        #expect(try Self.mode(of: key) == 0o600)
        #expect(try String(contentsOfFile: key, encoding: .utf8).contains("\"other\""))
    }

    @Test("export --output writes a file of mode 0600, and replaces one only with --force")
    func exportOutput() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let file = folder.path("registry.jsonl")
        let exported = try await folder.run(["export", "--output", file])
        #expect(exported.status == 0)
        #expect(exported.stdout.isEmpty)
        #expect(exported.errorLines == ["exported 2 records to \(file)"])
        #expect(try Self.mode(of: file) == 0o600)
        #expect(try String(contentsOfFile: file, encoding: .utf8).hasPrefix(#"{"type":"header""#))

        let refused = try await folder.run(["export", "--output", file])
        #expect(refused.status == 1)
        #expect(refused.errorLines == ["Error: \(file) exists; --force replaces it"])
        chmod(file, 0o644)
        #expect(try await folder.run(["export", "--output", file, "--force"]).status == 0)
        #expect(try Self.mode(of: file) == 0o600)
        // Without --output, the file goes to stdout as before.
        #expect(try await folder.run(["export"]).stdout.hasPrefix(#"{"type":"header""#))
    }

    // MARK: - --db

    /// Every command that opens the database, `DB` standing for it.
    static let databaseCommands: [[String]] = [
        ["group", "list", "--db", "DB"], ["project", "create", "--sender-id", "1", "--db", "DB"],
        ["project", "show", "--db", "DB"], ["export", "--db", "DB"], ["import", "/dev/null", "--db", "DB"],
        ["import-groups", "--project", "p", "/dev/null", "--db", "DB"],
        ["generate", "--tokens", "1", "--topics", "1", "--subscriptions", "1", "--db", "DB"],
        ["copy", "--to", "target.sqlite", "--from", "DB"], ["serve", "--port", "0", "--db", "DB"],
    ]

    static func command(_ command: [String], on database: String) -> [String] {
        command.map { $0 == "DB" ? database : $0 }
    }

    @Test(
        "--db naming a folder, of any length, exits 2 with one line",
        arguments: [".", "a", "folder/", "/tmp"])
    func databaseIsAFolder(location: String) async throws {
        let folder = try Folder()
        try FileManager.default.createDirectory(atPath: folder.path("a"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder.path("folder"), withIntermediateDirectories: true)
        for command in Self.databaseCommands {
            let outcome = try await folder.run(Self.command(command, on: location))
            #expect(outcome.status == 2, "\(command)")
            #expect(outcome.errorLines.count == 1, "\(command): \(outcome.stderr)")
            #expect(outcome.stderr.contains("it is a folder"), "\(command): \(outcome.stderr)")
            #expect(!outcome.stderr.contains("Illegal instruction") && !outcome.stderr.contains("Backtrac"))
        }
    }

    @Test("--db in a folder that does not exist exits 2 with one line")
    func databaseFolderMissing() async throws {
        let folder = try Folder()
        for command in Self.databaseCommands {
            let outcome = try await folder.run(Self.command(command, on: "missing/registry.sqlite"))
            #expect(outcome.status == 2, "\(command)")
            #expect(outcome.errorLines.count == 1, "\(command): \(outcome.stderr)")
            #expect(outcome.stderr.contains("the folder missing does not exist"), "\(command): \(outcome.stderr)")
        }
    }

    @Test("Where a folder's path ends, without a trap on one character")
    func folders() {
        #expect(StoreFactory.problem(opening: "postgres://u@h/db") == nil)
        #expect(StoreFactory.problem(opening: "/") == "it is a folder; name a file in it, such as /registry.sqlite")
        #expect(
            StoreFactory.problem(opening: "/no-such-folder/r.sqlite") == "the folder /no-such-folder does not exist")
        #expect(StoreFactory.problem(opening: "/etc/hostname/r.sqlite") == "/etc/hostname is not a folder")
    }

    @Test("--db naming a file that is not SQLite: exits 2 saying it is not a fcm-registry database, the file untouched")
    func databaseOfSomethingElse() async throws {
        let folder = try Folder()
        let text = try folder.write("notes.txt", "these are notes, not a database\n")
        for (file, reason) in [(text, "it is not an SQLite file")] {
            let before = try Data(contentsOf: URL(fileURLWithPath: file))
            for command in Self.databaseCommands where !["copy", "generate"].contains(command.first) {
                let outcome = try await folder.run(Self.command(command, on: file))
                #expect(outcome.status == 2, "\(command)")
                // serve logs its start-up steps first; its error is its last line.
                #expect(command.first == "serve" || outcome.errorLines.count == 1, "\(command): \(outcome.stderr)")
                #expect(
                    outcome.errorLines.last?.contains("\(file) is not a fcm-registry database") == true,
                    "\(command): \(outcome.stderr)")
                #expect(outcome.stderr.contains(reason), "\(command): \(outcome.stderr)")
                #expect(!outcome.stderr.contains("PRAGMA"), "\(command): \(outcome.stderr)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        }
    }

    @Test(
        "A PostgreSQL that cannot be reached is named with what went wrong, at once or within the 2.5 s a refused connection is tried",
        arguments: [
            ("postgres://u:p@127.0.0.1:9/registry?sslmode=disable", "cannot reach PostgreSQL at 127.0.0.1:9: connection refused"),
            ("postgres://u:p@[::1]:9/registry?sslmode=disable", "cannot reach PostgreSQL at [::1]:9: connection refused"),
            ("postgres://u:p@no-such-host.invalid/registry", "cannot reach PostgreSQL at no-such-host.invalid:5432: unknown host"),
        ])
    func postgresOutOfReach(url: String, words: String) async throws {
        #expect(StoreFactory.postgresPatience <= .milliseconds(2500))
        let folder = try Folder()
        for command in [["project", "show", "--db", "DB"], ["group", "list", "--db", "DB"], ["serve", "--port", "0", "--db", "DB"]] {
            let outcome = try await folder.run(Self.command(command, on: url))
            #expect(outcome.status == 2, "\(command)")
            #expect(outcome.errorLines.last?.contains(words) == true, "\(command): \(outcome.stderr)")
            #expect(!outcome.stderr.contains("SingleConnectionFailure") && !outcome.stderr.contains("errno"))
            #expect(!outcome.stderr.contains(":p@"), "never the password")
        }
    }

    // MARK: - serve

    @Test("A busy port: serve says which and exits 2")
    func busyPort() async throws {
        let folder = try Folder()
        let (socket, port) = try Self.listeningSocket()
        defer { close(socket) }
        let outcome = try await folder.run(
            ["serve", "--port", "\(port)", "--db", folder.path("r.sqlite"), "--log-level", "warning"])
        #expect(outcome.status == 2)
        #expect(outcome.errorLines.count == 1)
        #expect(outcome.stderr.contains("port \(port) is in use"))
        #expect(!outcome.stderr.contains("errno"))
    }

    // MARK: - import-groups

    @Test("import-groups --check says what the import would add, as the import says it, and writes nothing")
    func importGroupsCheck() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let csv = try folder.write(
            "groups.csv",
            "notification_key_name,notification_key,registration_token\nalice,\(Self.googleKey),tok-1:a\nalice,\(Self.googleKey),tok-2:a\n"
        )
        let checked = try await folder.run(["import-groups", "--project", "p", "--check", csv])
        #expect(checked.status == 0)
        let report = try Self.json(checked.stdout)
        #expect(
            report["wouldAdd"] as? [String: Int] == ["groups": 1, "members": 2, "notificationKeys": 1, "tokens": 2])
        #expect(report["added"] == nil)
        #expect(try await folder.run(["group", "list"]).stdout.contains("alice") == false)

        let imported = try await folder.run(["import-groups", "--project", "p", csv])
        #expect(imported.status == 0)
        // Only what a CSV of groups can add.
        #expect(try Self.json(imported.stdout)["added"] as? [String: Int] == report["wouldAdd"] as? [String: Int])
        #expect(try await folder.run(["group", "list"]).stdout.contains("alice"))
    }

    @Test("import-groups --check stops where the import stops, with the same words and status")
    func importGroupsCheckFails() async throws {
        let folder = try Folder()
        try await folder.createProject()
        _ = try await folder.run([
            "import-groups", "--project", "p", try folder.write("a.csv", "alice,\(Self.googleKey),tok-1:a\n"),
        ])
        // The key is alice's already: only the store can tell.
        let clash = try folder.write("b.csv", "bob,\(Self.googleKey),tok-2:a\n")
        let checked = try await folder.run(["import-groups", "--project", "p", "--check", clash])
        let imported = try await folder.run(["import-groups", "--project", "p", clash])
        #expect(checked.status == 1 && imported.status == 1)
        #expect(checked.errorLines.prefix(2) == imported.errorLines.prefix(2))
        #expect(checked.errorLines.dropFirst().first?.contains("already names group alice") == true)
    }

    @Test(
        "An empty CSV, or one with only its header, is an error in one line",
        arguments: ["", "notification_key_name,notification_key,registration_token\n", "\n\n"])
    func emptyCSV(text: String) async throws {
        let folder = try Folder()
        try await folder.createProject()
        let csv = try folder.write("groups.csv", text)
        for check in [["--check"], []] {
            let outcome = try await folder.run(["import-groups", "--project", "p"] + check + [csv])
            #expect(outcome.status == 1)
            #expect(
                outcome.errorLines == [
                    "Error: \(csv) holds no row; expected one per member: notification_key_name,notification_key,registration_token"
                ])
        }
    }

    @Test("A CSV separated by ';' or tabs is told to use commas", arguments: [(";", "';'"), ("\t", "tabs")])
    func separatorHint(separator: String, named: String) async throws {
        let folder = try Folder()
        try await folder.createProject()
        let csv = try folder.write(
            "groups.csv", ["alice", Self.googleKey, "tok-1:a"].joined(separator: separator) + "\n")
        let outcome = try await folder.run(["import-groups", "--project", "p", "--check", csv])
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("line 1: expected 3 fields"))
        #expect(outcome.stderr.contains("fields are separated by commas; this line uses \(named)"))
    }

    @Test("Ctrl-C during an import ends the current batch, says so, and exits 130; the same command finishes")
    func interruptedImport() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let rows = (0..<1_010).map { "g\($0),APA91bGHXQBB-Imported\($0 + 100_000),tok-\($0):a\n" }
        let input = Pipe()
        let process = try folder.process(["import-groups", "--project", "p"], input: input)
        // A command that died of the signal must fail this test, not end the test process.
        signal(SIGPIPE, SIG_IGN)
        try process.run()
        // A first batch, then the input stays open: the import waits for more, its handler in place.
        try input.fileHandleForWriting.write(contentsOf: Data(rows[..<1_000].joined().utf8))
        var written = false
        for _ in 0..<100 where !written {
            written = try await folder.run(["group", "show", "g999"]).status == 0
            if !written { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(written)
        kill(process.processIdentifier, SIGINT)
        try await Task.sleep(for: .milliseconds(200))
        try? input.fileHandleForWriting.write(contentsOf: Data(rows[1_000...].joined().utf8))
        try? input.fileHandleForWriting.close()
        let outcome = try await folder.finish(process)
        #expect(outcome.status == 130)
        #expect(outcome.stderr.contains("stopping once the batch being written is committed"))
        #expect(outcome.stderr.contains("Running the same command again finishes the rest"))
        let groups = try #require(try Self.json(outcome.stdout)["added"] as? [String: Int])["groups"]
        #expect(groups.map { $0 >= 1_000 && $0 < 1_010 } == true)

        let file = try folder.write("groups.csv", rows.joined())
        let again = try await folder.run(["import-groups", "--project", "p", file])
        #expect(again.status == 0)
        #expect((try Self.json(again.stdout)["added"] as? [String: Int])?["groups"] == 1_010 - (groups ?? 0))
    }

    // MARK: - Output

    @Test("project show prints an empty array on one line, and the rest as before")
    func emptyArray() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let shown = try await folder.run(["project", "show"])
        // The project's first key, listed without its value, between the ids and the relay.
        let keys = try #require(Self.json(shown.stdout)["keys"] as? [[String: Any]])
        let listed = try #require(shown.stdout.range(of: "  \"keys\" : [\n").map { shown.stdout[$0.lowerBound...] })
        let end = try #require(listed.range(of: "\n  ],\n"))
        #expect(
            shown.stdout.replacingCharacters(in: listed.startIndex..<end.upperBound, with: "") == """
                {
                  "project_id" : "p",
                  "relay" : null,
                  "sender_id" : "123",
                  "service_accounts" : []
                }

                """)
        #expect(keys.count == 1)
    }

    @Test("project add-key --scope --name makes a scoped key; project show lists keys, never their values")
    func scopedKey() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let added = try await folder.run([
            "project", "add-key", "--project-id", "p", "--scope", "send", "--scope", "read", "--name", "marketing dashboard",
        ])
        #expect(added.status == 0)
        let key = try Self.json(added.stdout)
        #expect(key["scopes"] as? [String] == ["send", "read"])
        #expect(key["name"] as? String == "marketing dashboard")
        let value = try #require(key["server_key"] as? String)
        // Without --scope or --name, the key has every scope and prints as before.
        let plain = try Self.json(try await folder.run(["project", "add-key", "--project-id", "p"]).stdout)
        #expect(Set(plain.keys) == ["project_id", "sender_id", "server_key"])
        let shown = try await folder.run(["project", "show"])
        let keys = try #require(Self.json(shown.stdout)["keys"] as? [[String: Any]])
        #expect(keys.map { $0["scopes"] as? [String] } == [
            ["send", "subscribe", "read", "admin"], ["send", "read"], ["send", "subscribe", "read", "admin"],
        ])
        #expect(keys[1]["name"] as? String == "marketing dashboard")
        #expect(!shown.stdout.contains(value))
        let wrong = try await folder.run(["project", "add-key", "--project-id", "p", "--scope", "write"])
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("--scope is send, subscribe, read or admin"))
        // A service account given scopes lists them; one without has FCM's meaning and lists none.
        #expect(try await folder.run(["project", "service-account", "--project-id", "p", "--scope", "read"]).status == 0)
        #expect(try await folder.run(["project", "service-account", "--project-id", "p"]).status == 0)
        let accounts = try #require(
            Self.json(try await folder.run(["project", "show"]).stdout)["service_accounts"] as? [[String: Any]])
        #expect(accounts.map { $0["scopes"] as? [String] } == [["read"], nil])
        // Keys are revoked until one admin key is left, which stays, said in the API's words.
        let plainKey = try #require(plain["server_key"] as? String)
        #expect(try await folder.run(["project", "revoke-key", plainKey]).status == 0)
        let other = try Self.json(
            try await folder.run(["project", "create", "--sender-id", "7", "--project-id", "q"]).stdout)
        let last = try await folder.run(["project", "revoke-key", try #require(other["server_key"] as? String)])
        #expect(last.status == 1)
        #expect(last.errorLines == ["Error: a project keeps at least one admin key: make another before revoking this one"])
    }

    @Test("project relay --rate gives a project its own budget; out of range or on a project that does not relay, it is refused")
    func relayRate() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let file = folder.path("sa.json")
        let account = try await folder.run(["project", "service-account", "--project-id", "p", "--output", file])
        try #require(account.status == 0, "\(account.stderr)")
        let alone = try await folder.run(["project", "relay", "--project-id", "p", "--rate", "400"])
        #expect(alone.status != 0)
        #expect(alone.stderr.contains("does not relay"))
        let zero = try await folder.run(["project", "relay", "--project-id", "p", "--service-account", file, "--rate", "0"])
        #expect(zero.status != 0)
        #expect(zero.stderr.contains("--rate must be between 1 and 10000000"))
        let on = try await folder.run(["project", "relay", "--project-id", "p", "--service-account", file, "--rate", "400"])
        try #require(on.status == 0, "\(on.stderr)")
        #expect(try Self.json(on.stdout)["rate"] as? Int == 400)
        let changed = try await folder.run(["project", "relay", "--project-id", "p", "--rate", "250"])
        #expect(changed.status == 0)
        let shown = try await folder.run(["project", "show", "--project-id", "p"])
        #expect((try Self.json(shown.stdout)["relay"] as? [String: Any])?["rate"] as? Int == 250)
        let cleared = try await folder.run(["project", "relay", "--project-id", "p", "--default-rate"])
        #expect(cleared.status == 0)
        let again = try await folder.run(["project", "show", "--project-id", "p"])
        #expect((try Self.json(again.stdout)["relay"] as? [String: Any])?["rate"] == nil)
    }

    @Test("copy carries each project's relay, own rate, mirror and webhooks, secrets included; run again, nothing twice")
    func copyCarriesProjectSettings() async throws {
        let folder = try Folder()
        try await folder.createProject()
        let file = folder.path("sa.json")
        try #require(try await folder.run(["project", "service-account", "--project-id", "p", "--output", file]).status == 0)
        let relay = try await folder.run(["project", "relay", "--project-id", "p", "--service-account", file, "--rate", "400"])
        try #require(relay.status == 0, "\(relay.stderr)")
        try #require(try await folder.run(["project", "mirror", "--project-id", "p", "--service-account", file]).status == 0)
        let source = try await StoreFactory.open(folder.path("registry.sqlite"))
        let project = try #require(try await source.projects().first)
        let hook = try await source.createWebhook(
            project: project.rowID, url: "https://93.184.215.14/hooks", events: [.messageCompleted], limit: 16, now: Date())

        let target = folder.path("target.sqlite")
        let copied = try await folder.run(["copy", "--from", folder.path("registry.sqlite"), "--to", target])
        try #require(copied.status == 0, "\(copied.stderr)")
        let summary = try Self.json(copied.stdout)
        #expect([summary["relays"], summary["mirrors"], summary["webhooks"]].map { $0 as? Int } == [1, 1, 1])
        let copy = try await StoreFactory.open(target)
        let moved = try #require(try await copy.projects().first { $0.projectId == "p" })
        #expect(try await copy.relaySettings()[moved.rowID] == source.relaySettings()[project.rowID])
        #expect(try await copy.sendRates()[moved.rowID] == 400)
        #expect(try await copy.mirrorSettings(of: moved) == source.mirrorSettings(of: project))
        let webhooks = try await copy.webhookCopies(of: moved.rowID)
        #expect(webhooks.map(\.publicID) == [hook.webhook.id])
        #expect(webhooks.first?.secret == hook.secret)

        let again = try await folder.run(["copy", "--from", folder.path("registry.sqlite"), "--to", target])
        #expect(again.status == 0)
        #expect(try Self.json(again.stdout)["webhooks"] as? Int == 1)
        #expect(try await copy.webhookCopies(of: moved.rowID).count == 1)
    }

    /// The checkout the tests' executable was built in.
    static let checkout = URL(fileURLWithPath: ServeProcess.binary).deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test(
        "--version names the commit of the checkout a source build sits in",
        .enabled(if: FileManager.default.fileExists(atPath: checkout + "/.git")))
    func version() async throws {
        let folder = try Folder()
        let git = try await folder.run(
            ["rev-parse", "--short=12", "HEAD"], executable: "/usr/bin/env", prefix: ["git", "-C", Self.checkout])
        try #require(git.status == 0, "no git")
        let outcome = try await folder.run(["--version"])
        #expect(outcome.status == 0)
        #expect(outcome.stdout.hasPrefix("0."))
        #expect(outcome.stdout.contains("commit \(git.stdout.trimmingCharacters(in: .whitespacesAndNewlines))"))
    }

    // MARK: - Helpers

    struct Outcome {
        var status: Int32
        var stdout: String
        var stderr: String

        /// Standard error's lines, blank ones left out.
        var errorLines: [String] { stderr.split(whereSeparator: \.isNewline).map(String.init) }
    }

    /// A folder of its own, the commands' working directory and default database, removed with it.
    final class Folder {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID())")

        init() throws {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }

        deinit { try? FileManager.default.removeItem(at: url) }

        func path(_ name: String) -> String { url.appendingPathComponent(name).path }

        func write(_ name: String, _ text: String) throws -> String {
            try text.write(toFile: path(name), atomically: false, encoding: .utf8)
            return path(name)
        }

        /// Project "p" in the folder's database.
        func createProject() async throws {
            let created = try await run(["project", "create", "--sender-id", "123", "--project-id", "p"])
            try #require(created.status == 0, "\(created.stderr)")
        }

        /// The command, on the folder's `registry.sqlite` unless it names another database.
        func process(
            _ arguments: [String], executable: String = ServeProcess.binary, prefix: [String] = [], input: Pipe? = nil
        )
            throws -> Process
        {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = prefix + arguments
            process.currentDirectoryURL = url
            var environment = ProcessInfo.processInfo.environment
            environment["FCM_REGISTRY_DB"] = path("registry.sqlite")
            environment.removeValue(forKey: "FCM_REGISTRY_PROJECT")
            process.environment = environment
            process.standardInput = input ?? FileHandle.nullDevice
            let id = UUID()
            for name in ["\(id).out", "\(id).err"] {
                try #require(FileManager.default.createFile(atPath: path(name), contents: nil))
            }
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: path("\(id).out")))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: path("\(id).err")))
            outputs[ObjectIdentifier(process)] = id
            return process
        }

        private var outputs: [ObjectIdentifier: UUID] = [:]

        func run(_ arguments: [String], executable: String = ServeProcess.binary, prefix: [String] = []) async throws
            -> Outcome
        {
            let process = try process(arguments, executable: executable, prefix: prefix)
            try process.run()
            return try await finish(process)
        }

        /// Waits for the process to end (at most a minute), and reads what it wrote.
        func finish(_ process: Process) async throws -> Outcome {
            for _ in 0..<600 where process.isRunning { try await Task.sleep(for: .milliseconds(100)) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let taken = outputs.removeValue(forKey: ObjectIdentifier(process))
            let id = try #require(taken)
            return Outcome(
                status: process.terminationStatus,
                stdout: try String(contentsOfFile: path("\(id).out"), encoding: .utf8),
                stderr: try String(contentsOfFile: path("\(id).err"), encoding: .utf8))
        }
    }

    static func mode(of path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// A socket listening on a free port of the loopback, for a port that is in use.
    static func listeningSocket() throws -> (Int32, Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 1) == 0
                    && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}
