import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import NIOSSL
@testable import Registry
import RegistryApp
@testable import RegistryServer
import ServiceLifecycle
import Synchronization
import TestBackends
import Testing
import XMPP
@testable import XMPPServer

/// A live XMPP listener (plain text unless `tls` is given) over the fixture's registry, with the
/// HTTP application sharing its hub for the native upstream and drain calls.
struct XMPPFixture: Sendable {
    let fixture: Fixture
    let hub: XMPPHub
    let port: Int

    static let header =
        #"<stream:stream to="gcm.googleapis.com" version="1.0" xmlns="jabber:client" xmlns:stream="http://etherx.jabber.org/streams">"#

    static func run(
        configure: (inout ServerConfiguration) -> Void = { _ in }, tls: NIOSSLContext? = nil,
        _ body: @escaping @Sendable (XMPPFixture) async throws -> Void
    ) async throws {
        let fixture = try await Fixture.make()
        var configuration = ServerConfiguration()
        configuration.xmpp.hub.drainTimeout = .seconds(2)
        configure(&configuration)
        let (hub, listener, ports) = listener(over: fixture, configuration: configuration, tls: tls)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await body(XMPPFixture(fixture: fixture, hub: hub, port: port))
            group.cancelAll()
        }
    }

    /// A listener on a free port over `fixture`'s registry, its hub, and the port once it listens.
    static func listener(over fixture: Fixture, configuration: ServerConfiguration, tls: NIOSSLContext? = nil)
        -> (XMPPHub, XMPPListener, AsyncStream<Int>)
    {
        let hub = XMPPHub(limits: configuration.xmpp.hub, registry: fixture.registry)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let listener = XMPPListener(
            registry: fixture.registry, hub: hub, host: "127.0.0.1", port: 0, tls: tls, settings: configuration.xmpp.settings,
            maximumConnections: 100, logger: Logger(label: "test")
        ) { continuation.yield($0) }
        return (hub, listener, ports)
    }

    /// The native HTTP API over the same hub.
    func http(_ body: @escaping @Sendable (Fixture.Client) async throws -> Void) async throws {
        var settings = HTTPSettings()
        settings.port = 0
        let app = buildApplication(
            registry: fixture.registry, settings: settings, logger: Logger(label: "test"), sessions: hub)
        try await app.test(.router) { client in try await body(Fixture.Client(client: client, key: fixture.key)) }
    }

    /// A connection that has logged in with `authzid NUL authcid NUL key` and bound `resource`.
    func login(
        authzid: String = "", authcid: String = "123456789012", mechanism: String = "PLAIN", resource: String = "app1",
        session: Bool = true, secret: String? = nil, receiveBuffer: Int32? = nil
    ) async throws -> RawConnection {
        let connection = try RawConnection(port: port, receiveBuffer: receiveBuffer)
        await connection.send(Self.header)
        #expect(await connection.read(until: "</stream:features>").contains("<mechanism>PLAIN</mechanism>"))
        let credentials = Data("\(authzid)\0\(authcid)\0\(secret ?? fixture.key)".utf8).base64EncodedString()
        await connection.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="\#(mechanism)">\#(credentials)</auth>"#)
        #expect(await connection.read(until: "/>") == #"<success xmlns="urn:ietf:params:xml:ns:xmpp-sasl"/>"#)
        await connection.send(Self.header)
        #expect(await connection.read(until: "</stream:features>").contains("urn:ietf:params:xml:ns:xmpp-bind"))
        await connection.send(
            #"<iq type="set" id="b1"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"><resource>\#(resource)</resource></bind></iq>"#)
        #expect(
            await connection.read(until: "</iq>")
                == #"<iq type="result" id="b1"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"><jid>123456789012@gcm.googleapis.com/\#(resource)</jid></bind></iq>"#
        )
        // Upstream messages may follow the bind result at once; tests expecting them skip the session.
        guard session else { return connection }
        await connection.send(#"<iq type="set" id="s1"><session xmlns="urn:ietf:params:xml:ns:xmpp-session"/></iq>"#)
        #expect(await connection.read(until: "/>") == #"<iq type="result" id="s1"/>"#)
        return connection
    }

    /// Makes `tokens` known to the project (as a topic's subscribers).
    func register(_ tokens: [String]) async throws {
        _ = try await fixture.registry.subscribe(tokens, to: "news", in: fixture.project)
    }
}

/// Sends a downstream `<gcm>` JSON and returns the next `<message>` the server writes.
func downstream(_ connection: RawConnection, _ json: String, id: String = "") async -> String {
    await connection.send(#"<message id="\#(id)"><gcm xmlns="google:mobile:data">\#(json)</gcm></message>"#)
    return await connection.read(until: "</message>")
}

/// The JSON inside a `<message><gcm>` the server wrote.
func gcmJSON(_ stanza: String) -> JSON? {
    guard let start = stanza.range(of: "google:mobile:data\">"), let end = stanza.range(of: "</gcm>") else { return nil }
    let text = String(stanza[start.upperBound..<end.lowerBound]).replacingOccurrences(of: "&lt;", with: "<")
        .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
    return try? JSONDecoder().decode(JSON.self, from: Data(text.utf8))
}

@Suite("XMPP connection server", .onEveryBackend, .serialized)
struct XMPPServerTests {
    @Test(
        "Login as each client spells it: PLAIN and X-OAUTH2, sender id with or without a domain, as authcid or authzid",
        arguments: [
            ("123456789012@gcm.googleapis.com", "123456789012", "PLAIN"),
            ("", "123456789012", "PLAIN"),
            ("", "123456789012@gcm.googleapis.com", "X-OAUTH2"),
            ("", "123456789012@fcm.googleapis.com", "X-GOOGLE-TOKEN"),
        ])
    func login(authzid: String, authcid: String, mechanism: String) async throws {
        try await XMPPFixture.run { xmpp in
            let connection = try await xmpp.login(authzid: authzid, authcid: authcid, mechanism: mechanism)
            await connection.send(#"<iq from="" to="fcm-xmpp.googleapis.com" id="c2s1" type="get"><ping xmlns="urn:xmpp:ping"/></iq>"#)
            #expect(await connection.read(until: "/>") == #"<iq from="fcm-xmpp.googleapis.com" id="c2s1" type="result"/>"#)
            await connection.send(#"<iq type="get" id="r1"><query xmlns="jabber:iq:roster"/></iq>"#)
            #expect(await connection.read(until: "</iq>").contains("service-unavailable"))
        }
    }

    @Test("An OAuth2 access token is accepted as the password (X-OAUTH2)")
    func accessToken() async throws {
        try await XMPPFixture.run { xmpp in
            let token = xmpp.fixture.registry.accessTokens.issue(
                for: xmpp.fixture.project, expiresAt: Date() + 3600, nonce: Array(repeating: 7, count: 8)
            ).token
            let connection = try await xmpp.login(
                authcid: "123456789012@gcm.googleapis.com", mechanism: "X-OAUTH2", secret: token)
            await connection.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
            #expect(await connection.read(until: "/>").contains(#"id="p" type="result""#))
        }
    }

    @Test("A notification key, a topic and a condition are acked like a token, and reach the same members")
    func otherTargets() async throws {
        try await XMPPFixture.run { xmpp in
            try await xmpp.register([token(1), token(2)])
            let key = try await xmpp.fixture.registry.createGroup(
                named: "g", tokens: [token(1), token(2)], in: xmpp.fixture.project)
            let connection = try await xmpp.login()
            let targets = [
                #""to":"\#(key)""#, #""notification_key":"\#(key)""#, #""to":"/topics/news""#,
                #""condition":"'news' in topics || 'other' in topics""#,
            ]
            for (n, target) in targets.enumerated() {
                let answer = await downstream(connection, #"{\#(target),"message_id":"t-\#(n)"}"#)
                #expect(gcmJSON(answer)?["message_type"] == "ack", "\(target)")
            }
            let logged = try await xmpp.fixture.registry.loggedMessages(
                .all, in: xmpp.fixture.project, after: nil, limit: 10)
            #expect(logged.items.map(\.recipientCount) == [2, 2, 2, 2])
        }
    }

    @Test(
        "A wrong key, another project's sender id, or an unoffered mechanism fails and closes the stream",
        arguments: [("123456789012", "wrong-key", "PLAIN"), ("999999999999", nil, "PLAIN"), ("123456789012", nil, "SCRAM-SHA-1")])
    func refusedLogin(user: String, key: String?, mechanism: String) async throws {
        try await XMPPFixture.run { xmpp in
            let connection = try RawConnection(port: xmpp.port)
            await connection.send(XMPPFixture.header)
            _ = await connection.read(until: "</stream:features>")
            let credentials = Data("\0\(user)\0\(key ?? xmpp.fixture.key)".utf8).base64EncodedString()
            await connection.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="\#(mechanism)">\#(credentials)</auth>"#)
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.hasPrefix(#"<failure xmlns="urn:ietf:params:xml:ns:xmpp-sasl">"#))
            #expect(text.contains(mechanism == "PLAIN" ? "<not-authorized/>" : "<invalid-mechanism/>"))
            #expect(closed)
        }
    }

    @Test("A stanza before logging in is a not-authorized stream error")
    func stanzaBeforeLogin() async throws {
        try await XMPPFixture.run { xmpp in
            let connection = try RawConnection(port: xmpp.port)
            await connection.send(XMPPFixture.header + #"<message><gcm xmlns="google:mobile:data">{}</gcm></message>"#)
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.contains("<not-authorized xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"))
            #expect(text.hasSuffix("</stream:stream>"))
            #expect(closed)
        }
    }

    @Test("A downstream message is acked in CCS's exact form and recorded like an HTTP send")
    func ack() async throws {
        try await XMPPFixture.run { xmpp in
            try await xmpp.register([token(1)])
            let connection = try await xmpp.login()
            // Entity-escaped, as xmpppy and slixmpp write it, with time_to_live as a string of digits.
            let stanza = await downstream(
                connection,
                #"{&quot;to&quot;:&quot;\#(token(1))&quot;,&quot;message_id&quot;:&quot;m-1&quot;,&quot;data&quot;:{&quot;k&quot;:&quot;a&lt;b&quot;},&quot;time_to_live&quot;:&quot;600&quot;}"#
            )
            #expect(
                stanza
                    == #"<message><gcm xmlns="google:mobile:data">{"from":"\#(token(1))","message_id":"m-1","message_type":"ack"}</gcm></message>"#
            )
            let logged = try await xmpp.fixture.registry.loggedMessages(to: token(1), in: xmpp.fixture.project, after: nil, limit: 10)
            #expect(logged.items.map(\.via) == [.xmpp])
            #expect(logged.items.first?.body.contains(#""k":"a<b""#) == true)
        }
    }

    static let nacks: [(String, String)] = [
        (#"{"to":"not a token!","message_id":"n1"}"#, "BAD_REGISTRATION"),
        (#"{"to":"\#(token(99))","message_id":"n2"}"#, "DEVICE_UNREGISTERED"),
        (#"{"to":"\#(token(1))","message_id":"n3","time_to_live":-1}"#, "INVALID_JSON"),
        (#"{"to":"\#(token(1))","message_id":"n4","data":{"from":"x"}}"#, "INVALID_JSON"),
        (#"{"registration_ids":["\#(token(1))"],"message_id":"n5"}"#, "INVALID_JSON"),
        (#"{"condition":"'a' in topics &amp;&amp;","message_id":"n6"}"#, "INVALID_JSON"),
        (#"{"to":"\#(token(1))","message_id":"n7","data":{"k":"\#(String(repeating: "x", count: 5000))"}}"#, "INVALID_JSON"),
        (#"{"to":"/topics/bad topic","message_id":"n8"}"#, "INVALID_JSON"),
        (#"{"message_id":"n9"}"#, "INVALID_JSON"),
        (#"{"to":"\#(token(1))","message_id":"n10","message_type":"receipt"}"#, "BAD_ACK"),
        (#"{"message_id":"n11","message_type":"ack"}"#, "BAD_ACK"),
    ]

    @Test("Every nack the rules produce, always with an error_description", arguments: nacks)
    func nack(json: String, code: String) async throws {
        try await XMPPFixture.run { xmpp in
            try await xmpp.register([token(1)])
            let connection = try await xmpp.login()
            let stanza = await downstream(connection, json)
            #expect(stanza.hasPrefix("<message><gcm xmlns=\"google:mobile:data\">"))
            let answer = try #require(gcmJSON(stanza))
            #expect(answer["message_type"] == "nack")
            #expect(answer["error"]?.string == code)
            #expect(answer["message_id"] != nil)
            #expect(answer["error_description"]?.string?.isEmpty == false)
        }
    }

    @Test("No message_id, or text that is not JSON: a stanza error echoing the id and payload")
    func stanzaErrors() async throws {
        try await XMPPFixture.run { xmpp in
            let connection = try await xmpp.login()
            let missing = await downstream(connection, #"{"to":"REG_ID","data":{}}"#, id: "8")
            #expect(
                missing
                    == #"<message id="8" type="error" to="123456789012@gcm.googleapis.com/app1"><gcm xmlns="google:mobile:data">{"to":"REG_ID","data":{}}</gcm><error code="400" type="modify"><bad-request xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/><text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id\#n</text></error></message>"#
            )
            let numeric = await downstream(connection, #"{"to":"REG_ID","message_id":7}"#, id: "9")
            #expect(numeric.hasPrefix(#"<message id="9" type="error""#))
            let garbage = await downstream(connection, "hello", id: "10")
            #expect(garbage.hasPrefix(#"<message id="10" type="error""#))
            #expect(garbage.contains("JSON_PARSING_ERROR"))
            let duplicate = await downstream(connection, #"{"message_id":"a","message_id":"b","to":"x"}"#, id: "11")
            #expect(duplicate.hasPrefix(#"<message id="11" type="error""#))
        }
    }

    @Test("Upstream: delivered to a session, acked; unacked ones are delivered again to another session when a connection drops")
    func upstreamAndRedelivery() async throws {
        try await XMPPFixture.run { xmpp in
            try await xmpp.register([token(1)])
            try await xmpp.http { http in
                // No session yet: the message waits, and the call says so.
                let waiting = try await http.call(
                    .post, "/api/tokens/\(token(1))/upstream",
                    body: #"{"category":"com.example.app","data":{"hello":"world"},"message_id":"u-1"}"#)
                #expect(waiting.status == .accepted)
                #expect(waiting.json?["status"] == "waiting")

                let first = try await xmpp.login(resource: "first", session: false)
                let delivered = await first.read(until: "</message>")
                #expect(
                    delivered
                        == #"<message to="123456789012@gcm.googleapis.com" from="devices@gcm.googleapis.com" type="normal"><gcm xmlns="google:mobile:data">{"category":"com.example.app","data":{"hello":"world"},"from":"\#(token(1))","message_id":"u-1"}</gcm></message>"#
                )
                // The first connection drops without acking: the second gets the message again.
                first.drop()
                let second = try await xmpp.login(resource: "second", session: false)
                #expect(gcmJSON(await second.read(until: "</message>"))?["message_id"] == "u-1")
                await second.send(
                    #"<message><gcm xmlns="google:mobile:data">{"to":"\#(token(1))","message_id":"u-1","message_type":"ack"}</gcm></message>"#
                )
                // A ping round trip orders what follows after the ack.
                await second.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
                _ = await second.read(until: "/>")
                let sent = try await http.call(
                    .post, "/api/tokens/\(token(1))/upstream", body: #"{"category":"c","data":{}}"#)
                #expect(sent.json?["status"] == "sent")
                _ = await second.read(until: "</message>")
                let connections = try await http.call(.get, "/api/xmpp/connections")
                #expect(connections.json?["connections"]?.array?.count == 1)
                #expect(connections.json?["connections"]?.array?.first?["unackedUpstream"] == 1)

                let unknown = try await http.call(
                    .post, "/api/tokens/\(token(2))/upstream", body: #"{"category":"c","data":{}}"#)
                #expect(unknown.status == .notFound)
            }
        }
    }

    @Test("A receipt follows an accepted message that asked for one, and may be acked with or without dr2:", arguments: [true, false])
    func receipt(prefixed: Bool) async throws {
        try await XMPPFixture.run { xmpp in
            try await xmpp.register([token(1)])
            let connection = try await xmpp.login()
            let ack = await downstream(
                connection, #"{"to":"\#(token(1))","message_id":"m-1","delivery_receipt_requested":true}"#)
            #expect(gcmJSON(ack)?["message_type"] == "ack")
            let receipt = await connection.read(until: "</message>")
            #expect(receipt.hasPrefix(#"<message to="123456789012@gcm.googleapis.com" from="devices@gcm.googleapis.com" type="normal">"#))
            let body = try #require(gcmJSON(receipt))
            #expect(body["message_id"] == "dr2:m-1")
            #expect(body["message_type"] == "receipt")
            #expect(body["from"] == "gcm.googleapis.com")
            #expect(body["time_to_live"] == 0)
            #expect(body["data"]?["message_status"] == "MESSAGE_SENT_TO_DEVICE")
            #expect(body["data"]?["original_message_id"] == "m-1")
            #expect(body["data"]?["device_registration_id"]?.string == token(1))
            #expect(body["data"]?["message_sent_timestamp"]?.string.flatMap { Int64($0) } != nil)
            #expect(xmpp.hub.sessions(of: xmpp.fixture.project).first?.unackedUpstream == 1)
            await connection.send(
                #"<message><gcm xmlns="google:mobile:data">{"to":"gcm.googleapis.com","message_id":"\#(prefixed ? "dr2:m-1" : "m-1")","message_type":"ack"}</gcm></message>"#
            )
            // A ping round trip orders the check after the ack.
            await connection.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
            _ = await connection.read(until: "/>")
            #expect(xmpp.hub.sessions(of: xmpp.fixture.project).first?.unackedUpstream == 0)

            // A dry run reaches no device: no receipt.
            let dry = await downstream(
                connection, #"{"to":"\#(token(1))","message_id":"m-2","dry_run":true,"delivery_receipt_requested":true}"#)
            #expect(gcmJSON(dry)?["message_type"] == "ack")
            #expect(xmpp.hub.sessions(of: xmpp.fixture.project).first?.unackedUpstream == 0)
        }
    }

    @Test("Draining: CONNECTION_DRAINING in its prefixed form, new messages nacked, then the stream closes")
    func draining() async throws {
        try await XMPPFixture.run { xmpp in
            try await xmpp.register([token(1)])
            try await xmpp.http { http in
                let connection = try await xmpp.login()
                let upstream = try await http.call(.post, "/api/tokens/\(token(1))/upstream", body: #"{"category":"c","data":{}}"#)
                let id = try #require(upstream.json?["messageId"]?.string)
                _ = await connection.read(until: "</message>")
                let drained = try await http.call(.post, "/api/xmpp/connections:drain", body: "{}")
                #expect(drained.json == ["drained": ["c1"]])
                #expect(
                    await connection.read(until: "</message>")
                        == #"<message><data:gcm xmlns:data="google:mobile:data">{"control_type":"CONNECTION_DRAINING","message_id":"control-draining","message_type":"control"}</data:gcm></message>"#
                )
                let refused = await downstream(connection, #"{"to":"\#(token(1))","message_id":"late"}"#)
                #expect(gcmJSON(refused)?["error"] == "CONNECTION_DRAINING")
                // The unacked upstream message keeps it open; its ack lets it close.
                await connection.send(
                    #"<message><gcm xmlns="google:mobile:data">{"to":"\#(token(1))","message_id":"\#(id)","message_type":"ack"}</gcm></message>"#
                )
                let (rest, closed) = await connection.readUntilClosed()
                #expect(rest == "</stream:stream>")
                #expect(closed)
                let unknown = try await http.call(.post, "/api/xmpp/connections:drain", body: #"{"connection":"c9"}"#)
                #expect(unknown.status == .notFound)
                // The drain is in the audit log, once (the refused one is not).
                let audit = try await http.call(.get, "/api/audit?action=xmpp.drained")
                #expect(audit.json?["entries"]?.array?.count == 1)
                #expect(audit.json?["entries"]?.array?.first?["target"] == "*")
                #expect(audit.json?["entries"]?.array?.first?["details"] == ["connections": "c1"])
            }
        }
    }

    @Test("Graceful shutdown drains every session: CONNECTION_DRAINING, then the end of the stream, then the listener returns")
    func shutdownDrains() async throws {
        let fixture = try await Fixture.make()
        var configuration = ServerConfiguration()
        configuration.xmpp.hub.drainTimeout = .seconds(5)
        let (hub, listener, ports) = XMPPFixture.listener(over: fixture, configuration: configuration)
        let group = ServiceGroup(services: [listener], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let xmpp = XMPPFixture(fixture: fixture, hub: hub, port: port)
            let connection = try await xmpp.login()
            await group.triggerGracefulShutdown()
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.hasPrefix(#"<message><data:gcm xmlns:data="google:mobile:data">"#))
            #expect(text.contains("CONNECTION_DRAINING"))
            #expect(text.hasSuffix("</stream:stream>"))
            #expect(closed)
            try await tasks.next()
        }
    }

    @Test(
        "Hostile XML ends the stream with the right error and expands nothing",
        arguments: [
            (#"<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>"#, "restricted-xml"),
            (XMPPFixture.header + "<message>&xxe;</message>", "restricted-xml"),
            (XMPPFixture.header + "<message><!-- x --></message>", "restricted-xml"),
            (XMPPFixture.header + "<message><body>" + String(repeating: "A", count: 70_000) + "</body></message>", "policy-violation"),
            (XMPPFixture.header + "<message></body>", "not-well-formed"),
        ])
    func hostileXML(text: String, condition: String) async throws {
        try await XMPPFixture.run { xmpp in
            let connection = try RawConnection(port: xmpp.port)
            await connection.send(text)
            let (answer, closed) = await connection.readUntilClosed()
            #expect(answer.contains("<stream:error><\(condition) xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"))
            #expect(closed)
        }
    }

    @Test("A connection that does not log in within the login timeout is closed")
    func loginTimeout() async throws {
        try await XMPPFixture.run(configure: { $0.xmpp.settings.loginTimeout = .milliseconds(300) }) { xmpp in
            let connection = try RawConnection(port: xmpp.port)
            await connection.send(XMPPFixture.header)
            let (answer, closed) = await connection.readUntilClosed()
            #expect(answer.contains("<connection-timeout"))
            #expect(closed)
        }
    }

    @Test("Past the per-sender connection limit, a login is refused")
    func connectionLimit() async throws {
        try await XMPPFixture.run(configure: { $0.xmpp.hub.connectionsPerProject = 1 }) { xmpp in
            let first = try await xmpp.login()
            let second = try RawConnection(port: xmpp.port)
            await second.send(XMPPFixture.header)
            _ = await second.read(until: "</stream:features>")
            let credentials = Data("\0123456789012\0\(xmpp.fixture.key)".utf8).base64EncodedString()
            await second.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">\#(credentials)</auth>"#)
            let (answer, closed) = await second.readUntilClosed()
            #expect(answer.contains("<policy-violation"))
            #expect(closed)
            _ = first
        }
    }

    @Test("A client that sends without reading what it is answered is closed")
    func nonReadingClient() async throws {
        try await XMPPFixture.run(configure: { $0.xmpp.settings.outboxBytes = 64 * 1024 }) { xmpp in
            let connection = try await xmpp.login()
            let pings = String(repeating: #"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#, count: 1000)
            // About 8 MB of answers: more than the socket buffers and the 64 KiB backlog hold.
            for _ in 0..<150 where await connection.send(pings) {}
            // Still reading nothing: the server works through the pings and gives up on the client.
            for _ in 0..<300 where !xmpp.hub.sessions(of: xmpp.fixture.project).isEmpty {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(xmpp.hub.sessions(of: xmpp.fixture.project).isEmpty)
            let (_, closed) = await connection.readUntilClosed()
            #expect(closed)
        }
    }

    @Test("A client that keeps its stream alive but reads nothing is closed once a write has waited the idle timeout")
    func aliveButNotReading() async throws {
        try await XMPPFixture.run(configure: {
            $0.xmpp.settings.idleTimeout = .seconds(3)
            $0.xmpp.settings.outboxBytes = 64 << 20
        }) { xmpp in
            let connection = try await xmpp.login(receiveBuffer: 8192)
            let pings = String(repeating: #"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#, count: 1000)
            // About 8 MB of answers: more than the socket buffers hold, far less than the outbox.
            for _ in 0..<150 where await connection.send(pings) {}
            // Whitespace keepalives keep the read side fresh; the write side waits for good.
            for _ in 0..<150 where !xmpp.hub.sessions(of: xmpp.fixture.project).isEmpty {
                await connection.send(" ")
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(xmpp.hub.sessions(of: xmpp.fixture.project).isEmpty)
        }
    }

    @Test("After ten failed logins from one address as one sender, those logins are refused for a while, the right key too; other senders are not")
    func failedLoginsHeldBack() async throws {
        try await XMPPFixture.run { xmpp in
            func attempt(as sender: String, _ secret: String) async throws -> String {
                let connection = try RawConnection(port: xmpp.port)
                await connection.send(XMPPFixture.header)
                _ = await connection.read(until: "</stream:features>")
                let credentials = Data("\0\(sender)\0\(secret)".utf8).base64EncodedString()
                await connection.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">\#(credentials)</auth>"#)
                let answer = await connection.read(until: "/>")
                return answer.hasPrefix("<failure") ? answer + (await connection.read(until: "</failure>")) : answer
            }
            // Someone else behind the same address fails for another sender: not held against this one.
            for _ in 0..<10 { #expect(try await attempt(as: "999", "wrong").contains("<not-authorized/>")) }
            #expect(try await attempt(as: "123456789012", xmpp.fixture.key).contains("<success"))
            for _ in 0..<10 { #expect(try await attempt(as: "123456789012", "wrong").contains("<not-authorized/>")) }
            let refused = try await attempt(as: "123456789012", xmpp.fixture.key)
            #expect(refused.contains("<temporary-auth-failure/>"))
            #expect(refused.contains("too many failed logins from this address: try again in"))
        }
    }

    @Test("A TLS handshake that never starts is closed at the login timeout", .enabled(if: ServeProcess.available))
    func silentTLS() async throws {
        let certificates = try TestCertificates()
        let files = certificates.files
        let context = try XMPPListener.tlsContext(.server(certificate: files.serverCertificate, key: files.serverKey))
        try await XMPPFixture.run(configure: { $0.xmpp.settings.loginTimeout = .milliseconds(300) }, tls: context) { xmpp in
            let connection = try RawConnection(port: xmpp.port)
            let (_, closed) = await connection.readUntilClosed()
            #expect(closed)
        }
    }

    @Test("TLS from the first byte, with the ALPN protocol xmpp-client", .enabled(if: ServeProcess.available))
    func tls() async throws {
        let certificates = try TestCertificates()
        let files = certificates.files
        let context = try XMPPListener.tlsContext(.server(certificate: files.serverCertificate, key: files.serverKey))
        try await XMPPFixture.run(tls: context) { xmpp in
            let answer = try #require(
                try await TLSTestClient.exchange(
                    port: xmpp.port, trusting: files.caCertificate, alpn: ["xmpp-client"],
                    serverName: "fcm-xmpp.googleapis.com", request: XMPPFixture.header, until: "</stream:features>"))
            #expect(answer.text.contains("<mechanism>X-OAUTH2</mechanism><mechanism>X-GOOGLE-TOKEN</mechanism><mechanism>PLAIN</mechanism>"))
            #expect(!answer.text.contains("starttls"))
            #expect(answer.negotiatedProtocol == "xmpp-client")
        }
    }
}

@Suite("XMPP hub", .onEveryBackend)
struct XMPPHubTests {
    @Test("Unacknowledged receipts take upstream room only, and stop taking it after the receipt ack timeout")
    func receiptRoom() async throws {
        let fixture = try await Fixture.make()
        var limits = XMPPHub.Limits()
        limits.pendingPerConnection = 2
        limits.receiptAckTimeout = .seconds(30)
        // The hub's clock is the test's: time passes when the test moves it, whatever the machine's load.
        let clock = Mutex(ContinuousClock.now)
        let hub = XMPPHub(limits: limits, registry: fixture.registry, now: { clock.withLock { $0 } })
        guard case .registered(let id) = hub.register(project: fixture.project, jid: "j", outbox: XMPPOutbox(limitBytes: 1 << 20) { _ in })
        else {
            Issue.record("not registered")
            return
        }
        hub.bind(id, project: fixture.project, jid: "j/r")
        for n in 0..<2 {
            #expect(try await hub.deliver(UpstreamMessage(messageID: "dr2:\(n)", json: "{}", isReceipt: true), to: fixture.project) == .sent(connection: id))
        }
        #expect(try await hub.deliver(UpstreamMessage(messageID: "dr2:2", json: "{}", isReceipt: true), to: fixture.project) == .waiting(position: 1))
        // Downstream messages have a budget of their own.
        #expect(hub.admitDownstream(id, project: fixture.project) == .admitted)
        clock.withLock { $0 += .seconds(29) }
        // Not yet past the timeout: the receipts still hold the room.
        #expect(hub.expireReceipts().isEmpty)
        #expect(try await hub.waitingCount(of: fixture.project) == 1)
        clock.withLock { $0 += .seconds(2) }
        // The waiting receipt goes first, then the new message.
        #expect(try await hub.deliver(UpstreamMessage(messageID: "u-1", json: "{}", isReceipt: false), to: fixture.project) == .sent(connection: id))
        #expect(try await hub.waitingCount(of: fixture.project) == 0)
        // A plain upstream message never expires: it waits for its ack.
        clock.withLock { $0 += .seconds(31) }
        #expect(try await hub.deliver(UpstreamMessage(messageID: "dr2:3", json: "{}", isReceipt: true), to: fixture.project) == .sent(connection: id))
        #expect(hub.sessions(of: fixture.project).first?.unackedUpstream == 2)
    }

    @Test("Downstream messages beyond the pending limit are refused until one is answered")
    func pendingLimit() async throws {
        let fixture = try await Fixture.make()
        var configuration = ServerConfiguration()
        configuration.xmpp.hub.pendingPerConnection = 2
        let hub = XMPPHub(limits: configuration.xmpp.hub, registry: fixture.registry)
        guard case .registered(let id) = hub.register(project: fixture.project, jid: "j", outbox: XMPPOutbox(limitBytes: 1 << 20) { _ in })
        else {
            Issue.record("not registered")
            return
        }
        #expect(hub.admitDownstream(id, project: fixture.project) == .admitted)
        #expect(hub.admitDownstream(id, project: fixture.project) == .admitted)
        #expect(hub.admitDownstream(id, project: fixture.project) == .tooManyPending)
        hub.answerDownstream(id, project: fixture.project, with: "<message/>")
        #expect(hub.admitDownstream(id, project: fixture.project) == .admitted)
    }
}
