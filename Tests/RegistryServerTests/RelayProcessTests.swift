import Foundation
import HummingbirdTesting
import Registry
import TestBackends
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The relay as processes: `serve` killed with -9 mid-delivery and started again, and two servers
/// on one database. FCM is an emulator registry served live in the test process.
@Suite(.onEveryBackend, .enabled(if: ServeProcess.available, "needs the built fcm-registry"))
struct RelayProcessTests {
    /// Slow enough to kill mid-way, quick to take over: pages of 20 at 200 sends a second, and a
    /// one-second lease.
    static let options = [
        "--relay-lease", "1s", "--relay-rate", "200", "--relay-page-size", "20", "--relay-poll-interval", "100ms",
        "--log-level", "warning",
    ]

    /// After `kill -9`, every device still gets the message, and only what was in flight when the
    /// process died goes twice. After SIGTERM, the page in flight is finished and recorded, and
    /// the next server goes on from there: no device gets it twice.
    @Test(arguments: [SIGKILL, SIGTERM])
    func aStoppedServersWorkIsFinishedByTheNext(signal: Int32) async throws {
        let upstream = try await Fixture.make()
        try await upstream.test(.live) { upstreamClient in
            let port = try #require(upstreamClient.client.port)
            let tokens = (1...300).map(token)
            for device in tokens { _ = try await upstream.registry.registerToken(device, in: upstream.project) }
            let (first, key, id) = try await Self.stoppedMidSend(
                Self.options, to: tokens, through: upstream, port: port, signal: signal)
            let before = try await Self.received(upstream).count
            #expect(before < tokens.count)

            let second = try ServeProcess(Self.options, database: first.database)
            try await waitUntil(60) {
                let message = try await Self.get(second, "/api/messages/\(id)", key: key)
                return message["delivery"]?["pending"] == 0
            }
            let message = try await Self.get(second, "/api/messages/\(id)", key: key)
            #expect(message["delivery"] == ["pending": 0, "delivered": 300, "failed": 0, "cancelled": 0])
            let received = try await Self.received(upstream)
            #expect(Set(received) == Set(tokens))
            #expect(received.count - tokens.count <= (signal == SIGKILL ? 20 : 0))
        }
    }

    /// A server killed mid-delivery and started again under the same `--server-id` takes its
    /// unfinished message back at once: it does not wait out its own lease (a minute here).
    @Test func aServerStartedAgainTakesBackItsClaimsAtOnce() async throws {
        let upstream = try await Fixture.make()
        try await upstream.test(.live) { upstreamClient in
            let port = try #require(upstreamClient.client.port)
            let tokens = (1...300).map(token)
            for device in tokens { _ = try await upstream.registry.registerToken(device, in: upstream.project) }
            var options = Self.options
            options[1] = "60s"  // --relay-lease
            options += ["--server-id", "relay-1"]
            let (first, key, id) = try await Self.stoppedMidSend(
                options, to: tokens, through: upstream, port: port, signal: SIGKILL)

            let second = try ServeProcess(options, database: first.database)
            // Well within the minute the lease would hold the message.
            try await waitUntil(30) {
                try await Self.get(second, "/api/messages/\(id)", key: key)["delivery"]?["pending"] == 0
            }
            #expect(Set(try await Self.received(upstream)) == Set(tokens))
        }
    }

    /// A server started with `options`, relaying a topic send to `tokens` through the emulator
    /// `upstream`, stopped with `signal` once 60 devices have the message and most do not.
    /// - Returns: the stopped server, its project's key, and the message's id.
    static func stoppedMidSend(
        _ options: [String], to tokens: [String], through upstream: Fixture, port: Int, signal: Int32
    ) async throws -> (ServeProcess, String, Int64) {
        let first = try ServeProcess(options)
        let key = try await first.key()
        try await relay(first.database, to: upstream, port: port)
        try await post(first, "/iid/v1:batchAdd", key: key, #"{"to":"/topics/news","registration_tokens":\#(jsonArray(tokens))}"#)
        let sent = try await post(first, "/fcm/send", key: key, #"{"to":"/topics/news","data":{"k":"v"}}"#)
        let id = try #require(sent["message_id"].flatMap { if case .number(let n) = $0 { Int64(n) } else { nil } })
        try await waitUntil { try await received(upstream).count >= 60 }
        kill(first.process.processIdentifier, signal)
        // Polled, not waited for: a blocked thread of the task pool would stall other tests.
        while first.process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        return (first, key, id)
    }

    @Test func twoServersOnOneDatabaseNeverDeliverTwice() async throws {
        let upstream = try await Fixture.make()
        try await upstream.test(.live) { upstreamClient in
            let port = try #require(upstreamClient.client.port)
            let tokens = (1...100).map(token)
            for device in tokens { _ = try await upstream.registry.registerToken(device, in: upstream.project) }
            let one = try ServeProcess(Self.options)
            let key = try await one.key()
            let two = try ServeProcess(Self.options, database: one.database)
            try await Self.relay(one.database, to: upstream, port: port)
            try await Self.post(one, "/iid/v1:batchAdd", key: key, #"{"to":"/topics/news","registration_tokens":\#(jsonArray(tokens))}"#)
            var ids: [Int64] = []
            for n in 0..<6 {
                let server = n.isMultiple(of: 2) ? one : two
                let sent = try await Self.post(server, "/fcm/send", key: key, #"{"to":"/topics/news","data":{"n":"\#(n)"}}"#)
                ids.append(try #require(sent["message_id"].flatMap { if case .number(let v) = $0 { Int64(v) } else { nil } }))
            }
            for id in ids {
                try await waitUntil(60) {
                    try await Self.get(two, "/api/messages/\(id)", key: key)["delivery"]?["pending"] == 0
                }
            }
            // Six messages, each to every device exactly once, whichever server worked it.
            var seen: [String: Int] = [:]
            for message in try await upstream.loggedBodies() {
                let key = "\(message["data"]?["n"]?.string ?? "?") \(message["token"]?.string ?? "?")"
                seen[key, default: 0] += 1
            }
            #expect(seen.count == 600)
            #expect(seen.values.allSatisfy { $0 == 1 })
        }
    }

    // MARK: - Helpers

    /// `project relay` on the database, as a user runs it, with a service account of the emulator;
    /// the sends go to `sendUpstream` when given, else to the emulator.
    static func relay(_ database: String, to upstream: Fixture, port: Int, sendingTo sendUpstream: String? = nil)
        async throws
    {
        let (_, file) = try await upstream.registry.createServiceAccount(
            forProject: "test-app", tokenURI: "http://127.0.0.1:\(port)/token")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID()).json")
        try JSONEncoder().encode(file).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }
        let command = Process()
        command.executableURL = URL(fileURLWithPath: ServeProcess.binary)
        command.arguments = [
            "project", "relay", "--project-id", "default", "--service-account", path.path, "--upstream",
            sendUpstream ?? "http://127.0.0.1:\(port)", "--db", database,
        ]
        command.standardOutput = FileHandle.nullDevice
        try command.run()
        while command.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(command.terminationStatus == 0)
    }

    /// The tokens FCM received a message for, one entry per message.
    static func received(_ upstream: Fixture) async throws -> [String] {
        try await upstream.loggedBodies().compactMap { $0["token"]?.string }
    }

    @discardableResult
    static func post(_ server: ServeProcess, _ path: String, key: String, _ body: String) async throws -> JSON {
        try await exchange(
            server,
            "POST \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        )
    }

    static func get(_ server: ServeProcess, _ path: String, key: String) async throws -> JSON {
        try await exchange(server, "GET \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\nConnection: close\r\n\r\n")
    }

    private static func exchange(_ server: ServeProcess, _ request: String) async throws -> JSON {
        let connection = try await server.connect()
        _ = await connection.send(request)
        let text = await connection.readUntilClosed().text
        guard let start = text.range(of: "\r\n\r\n") else { return .null }
        return (try? JSONDecoder().decode(JSON.self, from: Data(text[start.upperBound...].utf8))) ?? .null
    }
}
