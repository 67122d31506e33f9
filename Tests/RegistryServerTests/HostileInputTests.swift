@testable import ConnectionGuards
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Registry
import RegistryApp
@testable import RegistryServer
import RegistrySQLite
import Synchronization
import TestBackends
import Testing
import XMPPServer

#if canImport(Glibc)
import Glibc
#endif

/// What a hostile or careless client sends, and the clear 4xx (or closed connection) it gets.
@Suite("Hostile input", .onEveryBackend)
struct HostileInputTests {
    @Test("A key named twice in one object is refused, and the send is not recorded")
    func duplicateKeys() async throws {
        try await MessageAPITests.withMessaging { client, _ in
            let reply = try await client.call(
                .post, "/fcm/send", body: #"{"to":"/topics/news","dry_run":true,"dry_run":false}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?.string?.contains("dry_run") == true)
            let escaped = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/a","\u0074o":"/topics/b","registration_tokens":["x"]}"#)
            #expect(escaped.status == .badRequest)
            let nested = try await client.call(
                .post, "/v1/projects/test-app/messages:send",
                body: #"{"message":{"topic":"news","data":{"a":"1","a":"2"}}}"#)
            #expect(nested.status == .badRequest)
            // The same key in two different objects is fine.
            let fine = try await client.call(
                .post, "/v1/projects/test-app/messages:send",
                body: #"{"message":{"topic":"news","data":{"a":"1"},"android":{"data":{"a":"2"}}}}"#)
            #expect(fine.status == .ok)
            let log = try await client.call(.get, "/api/messages")
            #expect(log.json?["messages"]?.array?.count == 1)
        }
    }

    @Test(
        "v1 durations follow Google's Duration format exactly",
        arguments: ["0x10s", "-0s", "1e-400s", " 1s", "1.0000000001s", "1", "s", ".5s", "1.s", "+1s", "1 s"])
    func durations(ttl: String) async throws {
        try await MessageAPITests.withMessaging { client, _ in
            let reply = try await MessageAPITests.v1(
                client, #"{"message":{"token":"\#(token(1))","android":{"ttl":"\#(ttl)"}}}"#)
            #expect(reply.status == .badRequest)
            let good = try await MessageAPITests.v1(
                client, #"{"message":{"token":"\#(token(1))","android":{"ttl":"0.000000001s"}}}"#)
            #expect(good.status == .ok)
        }
    }

    @Test("Auth schemes are case-insensitive", arguments: ["BEARER", "bearer", "Bearer", "KEY=", "Key="])
    func schemes(scheme: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let header = scheme.hasSuffix("=") ? "\(scheme)\(client.key)" : "\(scheme) \(client.key)"
            let reply = try await client.call(.get, "/api/groups", auth: .some(header))
            #expect(reply.status == .ok)
        }
    }

    @Test("Group names: NFC spellings are one group, the limit is in bytes, invisible characters are refused")
    func groupNames() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let composed = "caf\u{E9}"
            let decomposed = "cafe\u{301}"
            _ = try await client.createGroup(composed, [token(1)])
            let again = try await client.groups(
                #"{"operation":"create","notification_key_name":"\#(decomposed)","registration_ids":["\#(token(2))"]}"#)
            #expect(again.json == ["error": "notification_key already exists"])
            let lookedUp = try await client.call(.get, "/fcm/notification?notification_key_name=cafe%CC%81")
            #expect(lookedUp.status == .ok)
            let zalgo = "z" + String(repeating: "\u{301}", count: 500_000)
            for name in [zalgo, String(repeating: "\u{E9}", count: 129), "a\u{200B}b", "evil\u{202E}txt", "tab\tname"] {
                let reply = try await client.groups(
                    #"{"operation":"create","notification_key_name":\#(jsonArray([name]).dropFirst().dropLast()),"registration_ids":["\#(token(3))"]}"#
                )
                #expect(reply.status == .badRequest, "\(name.prefix(12).debugDescription)")
            }
            let fits = try await client.groups(
                #"{"operation":"create","notification_key_name":"\#(String(repeating: "\u{E9}", count: 128))","registration_ids":["\#(token(3))"]}"#
            )
            #expect(fits.status == .ok)
            let listing = try await client.call(.get, "/api/groups")
            #expect(listing.json?["groups"]?.array?.count == 2)
        }
    }

    @Test("While another process holds the write lock, a write is 503 with Retry-After in its family's envelope")
    func lockedDatabase() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("locked-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let registry = try await RegistryService(
            store: SQLiteStore(RegistryDatabase.open(path: path, busyTimeout: 0.2)))
        try await registry.startAudience()
        let (_, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        let fixture = Fixture(registry: registry, project: try await registry.projects()[0], key: key)
        try await fixture.test { client in
            // An operator's sqlite3 shell in the middle of a transaction.
            let shell = Process()
            shell.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
            shell.arguments = [path]
            let input = Pipe()
            let output = Pipe()
            shell.standardInput = input
            shell.standardOutput = output
            try shell.run()
            input.fileHandleForWriting.write(Data("BEGIN IMMEDIATE;\nSELECT 'locked';\n".utf8))
            _ = output.fileHandleForReading.availableData
            let legacy = try await client.groups(
                #"{"operation":"create","notification_key_name":"g","registration_ids":["\#(token(1))"]}"#)
            #expect(legacy.status == .serviceUnavailable)
            #expect(legacy.headers[.retryAfter] == "1")
            #expect(legacy.json?["error"]?.string?.hasPrefix("Unavailable") == true)
            let v1 = try await client.call(
                .post, "/v1/projects/test-app/registrations/\(token(1))/topicSubscriptions?topic_name=t")
            #expect(v1.status == .serviceUnavailable)
            #expect(v1.json?["error"]?["status"] == "UNAVAILABLE")
            input.fileHandleForWriting.write(Data("ROLLBACK;\n.quit\n".utf8))
            shell.waitUntilExit()
            let after = try await client.groups(
                #"{"operation":"create","notification_key_name":"g","registration_ids":["\#(token(1))"]}"#)
            #expect(after.status == .ok)
        }
    }

    @Test("The database, -wal and -shm files are readable by their owner only")
    func filePermissions() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mode-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let registry = try await RegistryService(store: await StoreFactory.open(path))
        try await registry.startAudience()
        _ = try await registry.createProject(projectId: "p", senderId: "1")
        for suffix in ["", "-wal", "-shm"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path + suffix)
            #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o077 } == 0, "\(suffix)")
        }
    }
}

// MARK: - Over a real socket

/// A blocking TCP client for the connection-level tests: what a slow or hostile peer does.
final class RawConnection: @unchecked Sendable {
    let descriptor: Int32
    /// Bytes read past what `read(until:)` returned.
    private var pending: [UInt8] = []

    /// Connects to `port` on the loopback; with `receiveBuffer`, the socket's receive buffer is
    /// that many bytes instead of growing (as a client that reads slowly, or not at all).
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var bytes = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &bytes, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private let closed = Mutex(false)

    /// Drops the connection now, as a client that goes away does. The descriptor is closed once:
    /// closing it again later could close a socket of the server under test that reused its number.
    func drop() {
        guard !closed.withLock({ was in defer { was = true }; return was }) else { return }
        close(descriptor)
    }

    deinit { drop() }

    /// Sends bytes (off the cooperative pool, as reads are); false once the server has closed the connection.
    @discardableResult
    func send(_ text: String) async -> Bool {
        let bytes = Array(text.utf8)
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let sent = bytes.withUnsafeBytes {
                    Glibc.send(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                continuation.resume(returning: sent == bytes.count)
            }
        }
    }

    /// Everything the server sends until it closes the connection (or 10 s pass). The blocking
    /// reads run on a thread of their own: blocking the cooperative pool would stall the server
    /// under test, whose handlers run on it.
    func readUntilClosed() async -> (text: String, closed: Bool) {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.blockingReadUntilClosed()) }
        }
    }

    /// What the server sends up to and including the first `marker`, or all it sent when it closes
    /// the connection or 10 s pass without it.
    func read(until marker: String) async -> String {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.blockingRead(until: Array(marker.utf8))) }
        }
    }

    private func blockingRead(until marker: [UInt8]) -> String {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let range = pending.firstRange(of: marker) {
                let text = String(decoding: pending[..<range.upperBound], as: UTF8.self)
                pending.removeSubrange(..<range.upperBound)
                return text
            }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 {
                defer { pending.removeAll() }
                return String(decoding: pending, as: UTF8.self)
            }
            pending += buffer[0..<count]
        }
    }

    private func blockingReadUntilClosed() -> (text: String, closed: Bool) {
        var received = pending
        pending.removeAll()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 { return (String(decoding: received, as: UTF8.self), errno == ECONNRESET) }
            received += buffer[0..<count]
        }
    }
}

/// Serialized: each test holds a live server and raw sockets, and their short deadlines are
/// about what the server does, not about how busy the test runner is.
@Suite("Connections", .onEveryBackend, .serialized)
struct ConnectionTests {
    /// Runs `body` with the port of a live server; short deadlines for the tests about them, long
    /// ones elsewhere so that a busy machine cannot close a connection for the wrong reason.
    static func live(
        deadlines: Duration = .seconds(30), _ body: @escaping @Sendable (Int, String) async throws -> Void
    ) async throws {
        let fixture = try await Fixture.make()
        var settings = HTTPSettings()
        settings.port = 0
        settings.headerTimeout = deadlines
        settings.bodyTimeout = deadlines
        settings.idleTimeout = .seconds(5)
        let app = buildApplication(
            registry: fixture.registry, settings: settings, logger: Logger(label: "test"),
            sessions: XMPPHub(registry: fixture.registry))
        try await app.test(.live) { client in
            try await body(try #require(client.port), fixture.key)
        }
    }

    @Test("An answer given before the body was read (401) ends the connection instead of draining the body")
    func earlyAnswerCloses() async throws {
        try await Self.live { port, _ in
            let connection = try RawConnection(port: port)
            await connection.send("POST /fcm/send HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000000\r\n\r\n")
            await connection.send(String(repeating: "0", count: 65536))
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.hasPrefix("HTTP/1.1 401"))
            #expect(closed)
        }
    }

    @Test("A body over the limit is answered 413 and the connection closed")
    func tooLargeCloses() async throws {
        try await Self.live { port, key in
            let connection = try RawConnection(port: port)
            await connection.send(
                "POST /fcm/send HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n"
            )
            for _ in 0..<20 where await connection.send(String(repeating: " ", count: 65536)) {}
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.hasPrefix("HTTP/1.1 413"))
            #expect(closed)
        }
    }

    @Test("A request head that never completes is closed")
    func slowHeaderCloses() async throws {
        try await Self.live(deadlines: .milliseconds(300)) { port, _ in
            let connection = try RawConnection(port: port)
            await connection.send("GET /health HTTP/1.1\r\nHo")
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.isEmpty)
            #expect(closed)
        }
    }

    @Test("A body that stops arriving is closed")
    func slowBodyCloses() async throws {
        try await Self.live(deadlines: .milliseconds(300)) { port, key in
            let connection = try RawConnection(port: port)
            await connection.send(
                "POST /fcm/send HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\nContent-Length: 1000\r\n\r\n{")
            let (_, closed) = await connection.readUntilClosed()
            #expect(closed)
        }
    }

    @Test("A peer answered early more than 20 times in a second is told apart from others, and only it")
    func earlyAnswerFlood() throws {
        let answers = EarlyAnswers()
        let flooding = try SocketAddress(ipAddress: "10.0.0.1", port: 1)
        let other = try SocketAddress(ipAddress: "10.0.0.2", port: 1)
        // Counting restarts each second: count within one (a boundary may fall inside; retry once).
        for attempt in 0..<2 {
            let results = (0..<EarlyAnswers.perSecond + 1).map { _ in answers.isFlooding(flooding) }
            let others = answers.isFlooding(other)
            if results.last == true || attempt == 1 {
                #expect(results.dropLast().allSatisfy { !$0 })
                #expect(results.last == true)
                #expect(!others)
                break
            }
        }
        #expect(!answers.isFlooding(nil))
    }

    @Test("A request sent before the last one's answer was read is answered, even while its body is still coming")
    func pipelinedBody() async throws {
        try await Self.live { port, key in
            let condition = #"{"condition":"'a' in topics"}"#
            let connection = try RawConnection(port: port)
            await connection.send(
                "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "POST /api/conditions:check HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\n"
                    + "Content-Type: application/json\r\nConnection: close\r\n"
                    + "Content-Length: \(condition.utf8.count)\r\n\r\n" + condition.prefix(10))
            // The first answer is out while the second request's body is incomplete: once taken
            // for an early answer to it, which closed the connection.
            #expect(await connection.read(until: "\r\n\r\n").hasPrefix("HTTP/1.1 200"))
            await connection.send(String(condition.dropFirst(10)))
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.contains("HTTP/1.1 200"))
            #expect(text.contains("\"valid\":true"))
            #expect(closed)
        }
    }

    @Test("A kept-alive connection serves several requests")
    func keepAlive() async throws {
        try await Self.live { port, _ in
            let connection = try RawConnection(port: port)
            await connection.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.components(separatedBy: "HTTP/1.1 200").count == 3)
            #expect(closed)
        }
    }
}
