import Foundation
import RegistryServer
import TestBackends
import Testing

/// `serve` as a process, its listeners (XMPP, TLS) pushed to their limits over real sockets.
@Suite("Listener limits", .onEveryBackend, .serialized)
struct ListenerLimitTests {
    /// `serve`'s options for a TLS listener on `port` with `certificates`, without the XMPP
    /// listener TLS would bring.
    static func tlsOptions(_ certificates: TestCertificates, port: Int) -> [String] {
        [
            "--tls-cert", certificates.files.serverCertificate, "--tls-key", certificates.files.serverKey,
            "--tls-port", "\(port)", "--xmpp-port", "off",
        ]
    }

    /// Before, each connection past the limit was closed as it was accepted, and one of those
    /// closes stopped the whole process (an async channel dropped with its writer open).
    @Test(
        "XMPP at the connection limit: newcomers wait, connections that have not logged in give way to them, sessions are left alone",
        .enabled(if: ServeProcess.available))
    func xmppAtTheLimit() async throws {
        let xmppPort = ServeProcess.freePort()
        let server = try ServeProcess([
                "--xmpp-plaintext", "--xmpp-port", "\(xmppPort)", "--max-connections", "4", "--shutdown-deadline", "1s",
                // Connections not logging in give way after a third of it: two seconds. Long
                // enough that the session logs in within it on a loaded machine.
                "--xmpp-login-timeout", "6s",
            ])
        let key = try await server.key()
        let session = try await server.connect(port: xmppPort)
        await session.send(XMPPFixture.header)
        _ = await session.read(until: "</stream:features>")
        let credentials = Data("\0100000000000\0\(key)".utf8).base64EncodedString()
        await session.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">\#(credentials)</auth>"#)
        #expect(await session.read(until: "/>").contains("<success"))
        var silent: [RawConnection] = []
        for _ in 0..<3 { silent.append(try await server.connect(port: xmppPort)) }
        // Long enough for them to be allowed to give way (`SilentConnections.grace`).
        try await Task.sleep(for: .milliseconds(2200))
        // A flood past the limit: they wait in the kernel's queue, ahead of the newcomer.
        var flood: [RawConnection] = []
        for _ in 0..<5 { flood.append(try RawConnection(port: xmppPort)) }
        let newcomer = try RawConnection(port: xmppPort)
        await newcomer.send(XMPPFixture.header)
        #expect(await newcomer.read(until: "</stream:features>").contains("<mechanism>PLAIN</mechanism>"))
        // The session that logged in was never one to give way.
        await session.send(XMPPFixture.header)
        #expect(await session.read(until: "</stream:features>").contains("urn:ietf:params:xml:ns:xmpp-bind"))
        #expect(server.process.isRunning)
        #expect((try await server.metric(#"fcm_registry_connections_closed_total{reason="making_room"}"#) ?? 0) >= 3)
        try await server.terminate(waiting: 10)
    }

    @Test(
        "TLS: a connection that never starts its handshake, or never sends the HTTP/2 preface, is closed at the header timeout",
        .enabled(if: ServeProcess.available))
    func tlsSilentConnectionsClosed() async throws {
        let certificates = try TestCertificates()
        let tlsPort = ServeProcess.freePort()
        let server = try ServeProcess(Self.tlsOptions(certificates, port: tlsPort) + ["--header-timeout", "1s"])
        let silent = try await server.connect(port: tlsPort)
        let (bytes, closed) = await silent.readUntilClosed()
        #expect(bytes.isEmpty && closed)

        let noPreface = try await TLSTestClient.exchange(
            port: tlsPort, trusting: certificates.files.caCertificate, alpn: ["h2"], request: nil, seconds: 8)
        #expect(noPreface != nil)

        // A client that asks in time is served, over HTTP/1.1 as over HTTP/2.
        let answer = try await TLSTestClient.exchange(
            port: tlsPort, trusting: certificates.files.caCertificate, alpn: ["http/1.1"],
            request: "GET /health HTTP/1.1\r\nHost: fcm.googleapis.com\r\nConnection: close\r\n\r\n")
        #expect(answer?.text.hasPrefix("HTTP/1.1 200") == true)
        #expect((try await server.metric(#"fcm_registry_connections_closed_total{reason="header_timeout"}"#) ?? 0) >= 2)
        try await server.terminate(waiting: 10)
    }

    /// Without room made, the newcomer would wait in the accept queue until a header timeout (10
    /// minutes here) freed a slot.
    @Test(
        "TLS at the connection limit: a connection silent since it connected gives way to a new client",
        .enabled(if: ServeProcess.available))
    func tlsMakingRoom() async throws {
        let certificates = try TestCertificates()
        let tlsPort = ServeProcess.freePort()
        let server = try ServeProcess(
            Self.tlsOptions(certificates, port: tlsPort) + [
                "--max-connections", "3", "--header-timeout", "10m", "--body-timeout", "10m", "--idle-timeout", "10m",
                "--shutdown-deadline", "1s",
            ])
        var silent: [RawConnection] = []
        for _ in 0..<3 { silent.append(try await server.connect(port: tlsPort)) }
        // Long enough for them to be allowed to give way (`SilentConnections.grace`).
        try await Task.sleep(for: .milliseconds(2200))
        let answer = try await TLSTestClient.exchange(
            port: tlsPort, trusting: certificates.files.caCertificate, alpn: ["http/1.1"],
            request: "GET /health HTTP/1.1\r\nHost: fcm.googleapis.com\r\nConnection: close\r\n\r\n")
        #expect(answer?.text.hasPrefix("HTTP/1.1 200") == true)
        #expect((try await server.metric(#"fcm_registry_connections_closed_total{reason="making_room"}"#) ?? 0) >= 1)
        try await server.terminate(waiting: 10)
    }

    /// Before, such a connection waited on its handshake past the deadline's cancellation, and
    /// the process ended with a fatal error (status 132) five seconds later.
    @Test(
        "SIGTERM with TLS connections that never sent a request: they are closed at once and the process exits 0",
        .enabled(if: ServeProcess.available))
    func tlsShutdown() async throws {
        let certificates = try TestCertificates()
        let tlsPort = ServeProcess.freePort()
        let server = try ServeProcess(Self.tlsOptions(certificates, port: tlsPort) + ["--shutdown-deadline", "1s"])
        let silent = try await server.connect(port: tlsPort)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await server.terminate(waiting: 4))
        #expect(server.process.terminationStatus == 0)
        silent.drop()
    }

    @Test(
        "XMPP: a refused login's log line names a sender id or nothing, never what else the user field held, and comes once per interval; a message id cannot forge a line",
        .enabled(if: ServeProcess.available))
    func xmppLogLines() async throws {
        let xmppPort = ServeProcess.freePort()
        let server = try ServeProcess(
            ["--xmpp-plaintext", "--xmpp-port", "\(xmppPort)", "--log-level", "info", "--shutdown-deadline", "1s"],
            keepingLog: true)
        let key = try await server.key()
        let forged = "2026-01-01T00:00:00+0000 critical fcm-registry: forged"
        func login(as user: String, _ secret: String) async throws -> RawConnection {
            let connection = try await server.connect(port: xmppPort)
            await connection.send(XMPPFixture.header)
            _ = await connection.read(until: "</stream:features>")
            let credentials = Data("\0\(user)\0\(secret)".utf8).base64EncodedString()
            await connection.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">\#(credentials)</auth>"#)
            return connection
        }
        // A key typed into the user field, then a user name carrying a log line of its own.
        for user in [key] + Array(repeating: "123\n\(forged)", count: 5) {
            let refused = try await login(as: user, "wrong")
            #expect(await refused.read(until: "</failure>").contains("<not-authorized/>"))
        }
        // A message id is the client's to choose, and is logged with the send.
        let session = try await login(as: "100000000000", key)
        #expect(await session.read(until: "/>").contains("<success"))
        await session.send(XMPPFixture.header)
        _ = await session.read(until: "</stream:features>")
        let messageID = "m1\\n\(forged)"
        let nack = await downstream(session, #"{"to":"unknown-token","message_id":"\#(messageID)","data":{}}"#)
        #expect(nack.contains("nack"))
        try await server.terminate(waiting: 10)
        let log = server.log()
        #expect(!log.contains(key))
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix(forged.prefix(20)) })
        #expect(log.contains(#"xmpp.message_id="m1\n2026-01-01T00:00:00+0000 critical fcm-registry: forged""#))
        #expect(log.components(separatedBy: "xmpp login refused").count - 1 == 1)
    }
}
