import ConnectionGuards
import FCMWire
import Foundation
import Logging
import Metrics
import NIOCore
import Registry
import Synchronization
import XMPP

/// One XMPP client connection, from its stream header to its close: SASL, binding, pings, and
/// the `<gcm>` messages of an authenticated session (XMPP reference §2–§6).
///
/// Three tasks share the connection: the reader parses stanzas and answers them (downstream
/// messages go through the pipeline concurrently, up to the pending limit), the writer is the
/// only one to write, and a watchdog enforces the login and idle timeouts. The connection ends
/// when the writer has written its last stanza.
struct XMPPConnection {
    let registry: RegistryService
    let hub: XMPPHub
    let settings: XMPPSettings
    /// Connections not logged in yet, which give way near the connection limit.
    let silent: SilentConnections?
    let logger: Logger
    /// Failed logins by client address, shared by the listener's connections.
    let loginFailures = LoginFailures()
    /// Refusals and timeouts, logged once per interval for each kind however many connections
    /// earn them: a client can open connections as fast as they are refused.
    let refusalLog = LogThrottle()

    private enum Role { case reader, writer, watchdog }

    /// What the reader knows about the session.
    private struct Session {
        let connection: any Channel
        /// The client's IP address, for counting its failed logins.
        var address: String { connection.remoteAddress?.ipAddress ?? "?" }
        var domain = CCSWire.domain
        var project: Project?
        var id: String?
        var jid = ""
    }

    /// What the reader shares with the watchdog and with the end of `run`.
    private final class Activity: Sendable {
        struct State {
            var lastRead = ContinuousClock.now
            /// The session, once SASL succeeded.
            var session: (id: String, project: Project)?
        }

        let state = Mutex(State())
    }

    func run(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        let connection = channel.channel
        let outbox = XMPPOutbox(limitBytes: settings.outboxBytes) { last in
            // The last words, then the close; a peer that reads nothing (or never finished its
            // TLS handshake) leaves the write pending, and the close two seconds later fails it.
            connection.writeAndFlush(ByteBuffer(string: last)).whenComplete { _ in connection.close(promise: nil) }
            connection.eventLoop.scheduleTask(in: .seconds(2)) { connection.close(promise: nil) }
        }
        let activity = Activity()
        let started = ContinuousClock.now
        let peer = connection.remoteAddress?.description ?? "?"
        silent?.fellSilent(connection)
        defer { silent?.spoke(connection) }
        try? await channel.executeThenClose { inbound, outbound in
            await withTaskGroup(of: Role.self) { group in
                group.addTask {
                    for await item in outbox.stream {
                        switch item {
                        case .stanza(let text):
                            do {
                                outbox.writing()
                                try await outbound.write(ByteBuffer(string: text))
                            } catch {
                                outbox.abort(condition: nil)
                                return .writer
                            }
                            outbox.written(item)
                        case .end:
                            outbox.abort(condition: nil)
                            return .writer
                        case .fail(let condition, let text):
                            outbox.abort(condition: condition, text: text)
                            return .writer
                        }
                    }
                    return .writer
                }
                group.addTask {
                    await read(inbound, of: connection, outbox: outbox, activity: activity)
                    outbox.send(.end)
                    return .reader
                }
                group.addTask {
                    await watch(activity, outbox: outbox)
                    return .watchdog
                }
                while let role = await group.next() {
                    if role == .writer { break }
                }
                group.cancelAll()
            }
        }
        if let (id, project) = activity.state.withLock({ $0.session }) {
            hub.remove(id, project: project)
            logger.info(
                "xmpp session ended",
                metadata: [
                    "xmpp.connection": "\(id)", "project.id": "\(project.projectId)",
                    "duration": "\(ContinuousClock.now - started)",
                ])
        } else {
            logger.debug("xmpp connection closed before login", metadata: ["peer": "\(peer)"])
        }
    }

    /// Closes a connection that has not logged in within the login timeout, has sent nothing for
    /// the idle timeout, or has read nothing for as long while the server had something to write
    /// (its memory is bounded by the outbox, but it would hold a connection for good).
    private func watch(_ activity: Activity, outbox: XMPPOutbox) async {
        let started = ContinuousClock.now
        let tick = min(settings.loginTimeout, settings.idleTimeout, .seconds(1))
        while (try? await Task.sleep(for: tick)) != nil {
            let (lastRead, loggedIn) = activity.state.withLock { ($0.lastRead, $0.session != nil) }
            let now = ContinuousClock.now
            if !loggedIn && now - started > settings.loginTimeout {
                return close(outbox, "no login in time", text: "log in within \(settings.loginTimeout)")
            }
            if now - lastRead > settings.idleTimeout {
                return close(outbox, "idle", text: "idle for \(settings.idleTimeout)")
            }
            if let waiting = outbox.writeWaiting(), waiting > settings.idleTimeout {
                return close(outbox, "not reading", text: "read nothing for \(settings.idleTimeout)")
            }
        }
    }

    /// Ends the connection with a `connection-timeout` stream error, and says so in the log once
    /// per interval for each reason.
    private func close(_ outbox: XMPPOutbox, _ reason: String, text: String) {
        if let closed = refusalLog.event(reason) {
            logger.info("xmpp connection closed", metadata: ["reason": "\(reason)", "closed": "\(closed)"])
        }
        outbox.abort(condition: "connection-timeout", text: text)
    }

    // MARK: - Reading

    private func read(
        _ inbound: NIOAsyncChannelInboundStream<ByteBuffer>, of channel: any Channel, outbox: XMPPOutbox,
        activity: Activity
    ) async {
        // Before login only the stream header and `<auth>` are expected: a small budget.
        var parser = XMLStreamParser(limits: .init(stanzaBytes: min(settings.loginStanzaBytes, settings.stanzaBytes)))
        var session = Session(connection: channel)
        await withDiscardingTaskGroup { sends in
            do {
                for try await buffer in inbound {
                    activity.state.withLock { $0.lastRead = ContinuousClock.now }
                    parser.append(buffer.readableBytesView)
                    while true {
                        let event: XMLStreamEvent?
                        do {
                            event = try parser.next()
                        } catch let error as XMLStreamError {
                            if let times = refusalLog.event("stream refused") {
                                logger.info(
                                    "xmpp stream refused",
                                    metadata: [
                                        "xmpp.condition": "\(error.condition.rawValue)", "xmpp.text": "\(error.message)",
                                        "times": "\(times)",
                                    ])
                            }
                            outbox.abort(condition: error.condition.rawValue, text: error.message)
                            return
                        }
                        guard let event else { break }
                        let keepGoing = await handle(
                            event, session: &session, parser: &parser, outbox: outbox, sends: &sends)
                        if let id = session.id, let project = session.project {
                            activity.state.withLock { if $0.session == nil { $0.session = (id, project) } }
                        }
                        guard keepGoing else { return }
                    }
                }
            } catch {
                // The connection failed or was cancelled: nothing more to read.
            }
        }
    }

    /// Answers one event; `false` ends the stream.
    private func handle(
        _ event: XMLStreamEvent, session: inout Session, parser: inout XMLStreamParser, outbox: XMPPOutbox,
        sends: inout DiscardingTaskGroup
    ) async -> Bool {
        switch event {
        case .streamOpened(let header):
            if let to = header.attribute("to"), !to.isEmpty, to.utf8.count <= 255 { session.domain = to }
            let id = String(UInt64.random(in: .min ... .max), radix: 36)
            outbox.markOpened()
            outbox.send(CCSWire.streamHeader(from: session.domain, id: id))
            outbox.send(session.project == nil ? CCSWire.saslFeatures : CCSWire.sessionFeatures)
            return true
        case .streamClosed:
            return false
        case .stanza(let stanza):
            guard let project = session.project, let id = session.id else {
                return await authenticate(stanza, session: &session, parser: &parser, outbox: outbox)
            }
            switch stanza.localName {
            case "iq":
                answer(iq: stanza, session: &session, project: project, id: id, outbox: outbox)
            case "message":
                receive(message: stanza, session: session, project: project, id: id, outbox: outbox, sends: &sends)
            default:
                // Presence and anything else an app server may send are ignored, as CCS did.
                break
            }
            return true
        }
    }

    // MARK: - SASL

    private func authenticate(
        _ stanza: XMPPElement, session: inout Session, parser: inout XMLStreamParser, outbox: XMPPOutbox
    ) async -> Bool {
        guard stanza.localName == "auth", stanza.namespace == "urn:ietf:params:xml:ns:xmpp-sasl" else {
            outbox.send(.fail(condition: "not-authorized", text: "authenticate with SASL PLAIN first"))
            return false
        }
        guard let mechanism = stanza.attribute("mechanism"), SASLCredentials.mechanisms.contains(mechanism) else {
            outbox.send("<failure xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><invalid-mechanism/></failure>")
            return false
        }
        // A login under way is no longer one to give way near the connection limit.
        silent?.spoke(session.connection)
        let credentials = SASLCredentials(base64: stanza.text)
        let failures = LoginFailures.key(address: session.address, sender: credentials?.senderID)
        if let wait = loginFailures.refusal(of: failures) {
            if let times = refusalLog.event("login held back") {
                logger.notice(
                    "xmpp login refused: too many failed logins from this address",
                    metadata: [
                        "xmpp.sender": "\(credentials?.senderID ?? "(no sender id)")", "peer": "\(session.address)",
                        "times": "\(times)",
                    ])
            }
            outbox.send(CCSWire.saslTemporaryFailure(retryAfterSeconds: Int(wait.components.seconds) + 1))
            return false
        }
        var project: Project?
        if let credentials, let sender = credentials.senderID, !credentials.secret.isEmpty {
            let secret = credentials.secret
            let found =
                secret.hasPrefix(RegistryService.accessTokenPrefix)
                ? try? await registry.grant(authenticatedByAccessToken: secret)
                : try? await registry.grant(authenticatedBy: secret)
            // A CCS session sends: a key without the send scope does not sign in.
            if let found = found ?? nil, found.project.senderId == sender, found.scopes.allows(.send) {
                project = found.project
            }
        }
        guard let project else {
            loginFailures.failed(failures)
            // Only a well-formed sender id is named: whatever else a client put in the user
            // field may be a key typed in the wrong place.
            if let times = refusalLog.event("login refused") {
                logger.notice(
                    "xmpp login refused",
                    metadata: [
                        "xmpp.sender": "\(credentials?.senderID ?? "(no sender id)")", "peer": "\(session.address)",
                        "times": "\(times)",
                    ])
            }
            outbox.send(CCSWire.saslFailure)
            return false
        }
        loginFailures.succeeded(failures)
        let jid = "\(project.senderId)@\(CCSWire.domain)"
        switch hub.register(project: project, jid: jid, outbox: outbox) {
        case .registered(let id):
            session.project = project
            session.id = id
            session.jid = jid
            outbox.send(CCSWire.saslSuccess)
            parser.restart()
            parser.limits.stanzaBytes = settings.stanzaBytes
            logger.info(
                "xmpp session started",
                metadata: ["xmpp.connection": "\(id)", "project.id": "\(project.projectId)", "xmpp.mechanism": "\(mechanism)"])
            return true
        case .tooManyConnections:
            outbox.send(
                .fail(
                    condition: "policy-violation",
                    text: XMPPWording.tooManyConnections(hub.limits.connectionsPerProject)))
            return false
        case .shuttingDown:
            outbox.send(.fail(condition: "system-shutdown", text: XMPPWording.stopping))
            return false
        }
    }

    // MARK: - IQ

    private func answer(iq: XMPPElement, session: inout Session, project: Project, id: String, outbox: XMPPOutbox) {
        let type = iq.attribute("type") ?? ""
        let iqID = iq.attribute("id") ?? ""
        guard type == "get" || type == "set" else { return }
        if type == "set", let bind = iq.child("bind", namespace: "urn:ietf:params:xml:ns:xmpp-bind") {
            var resource = bind.child("resource")?.text.trimmingCharacters(in: .whitespaces) ?? ""
            if resource.isEmpty || resource.utf8.count > 256 || resource.unicodeScalars.contains(where: { $0.value < 0x20 }) {
                resource = "r" + String(UInt64.random(in: .min ... .max), radix: 36)
            }
            session.jid = "\(project.senderId)@\(CCSWire.domain)/\(resource)"
            outbox.send(CCSWire.bindResult(id: iqID, jid: session.jid))
            hub.bind(id, project: project, jid: session.jid)
        } else if type == "set", iq.child("session", namespace: "urn:ietf:params:xml:ns:xmpp-session") != nil {
            outbox.send(CCSWire.emptyResult(id: iqID))
        } else if type == "get", iq.child("ping", namespace: "urn:xmpp:ping") != nil {
            outbox.send(CCSWire.pong(id: iqID, from: iq.attribute("to").flatMap { $0.isEmpty ? nil : $0 } ?? session.domain))
        } else {
            outbox.send(CCSWire.serviceUnavailable(id: iqID))
        }
    }

    // MARK: - Messages

    private func receive(
        message stanza: XMPPElement, session: Session, project: Project, id: String, outbox: XMPPOutbox,
        sends: inout DiscardingTaskGroup
    ) {
        guard let gcm = stanza.child("gcm", namespace: CCSWire.namespace) else { return }
        func refuse(_ reason: String) {
            outbox.send(
                CCSWire.stanzaError(
                    id: stanza.attribute("id"), to: session.jid, payload: gcm,
                    text: XMPPWording.jsonParsingError(reason)))
        }
        let fields: [String: JSONValue]
        do {
            fields = try JSONBody.object(Array(gcm.text.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
        } catch {
            return refuse((error as? BadRequest)?.message ?? XMPPWording.invalidJSON)
        }
        guard case .string(let messageID)? = fields["message_id"] else {
            return refuse(XMPPWording.missingMessageID)
        }
        if let type = fields["message_type"] {
            acknowledge(fields, type: type, messageID: messageID, project: project, id: id, outbox: outbox)
            return
        }
        switch hub.admitDownstream(id, project: project) {
        case .draining:
            outbox.send(
                CCSWire.answer(
                    Self.nack(messageID, to: fields["to"]?.string, XMPPWording.draining)))
        case .tooManyPending:
            outbox.send(
                CCSWire.answer(
                    Self.nack(
                        messageID, to: fields["to"]?.string,
                        XMPPWording.tooManyPending(hub.limits.pendingPerConnection))))
        case .admitted:
            let (registry, hub, logger) = (registry, hub, logger)
            sends.addTask {
                let started = ContinuousClock.now
                let answer: XMPPDownstream.Answer
                do {
                    answer = try await XMPPDownstream.answer(to: fields, registry: registry, project: project, dryRun: false)
                } catch {
                    logger.error(
                        "xmpp send failed", metadata: ["error": "\(error)", "xmpp.message_id": "\(messageID.prefix(100))"])
                    var busy = false
                    if case .storeBusy? = error as? RegistryError { busy = true }
                    if let failure = error as? any StoreConnectionFailure, failure.meansUnavailable { busy = true }
                    hub.answerDownstream(
                        id, project: project,
                        with: CCSWire.answer(
                            Self.nack(
                                messageID, to: fields["to"]?.string,
                                busy ? XMPPWording.storeBusy : XMPPWording.internalError)))
                    return
                }
                hub.answerDownstream(id, project: project, with: CCSWire.answer(CCSWire.json(answer.json)))
                let outcome = answer.json["error"] as? String ?? "ack"
                Counter(label: "fcm_registry_xmpp_downstream_total", dimensions: [("answer", outcome)]).increment()
                logger.info(
                    "xmpp message",
                    metadata: [
                        "xmpp.connection": "\(id)", "project.id": "\(project.projectId)",
                        "xmpp.message_id": "\(messageID.prefix(100))",
                        "xmpp.answer": "\(answer.json["error"] ?? answer.json["message_type"] ?? "")",
                        "duration": "\(ContinuousClock.now - started)",
                    ])
                if let receipt = Self.receipt(for: answer, messageID: messageID, project: project) {
                    do {
                        _ = try await hub.deliver(receipt, to: project, preferring: id)
                    } catch {
                        logger.warning(
                            "xmpp receipt not stored",
                            metadata: ["xmpp.connection": "\(id)", "error": "\(String(describing: error).prefix(200))"])
                    }
                }
            }
        }
    }

    /// The app server's ack (or nack) of an upstream message or receipt.
    private func acknowledge(
        _ fields: [String: JSONValue], type: JSONValue, messageID: String, project: Project, id: String,
        outbox: XMPPOutbox
    ) {
        guard type == .string("ack") || type == .string("nack"), fields["to"]?.string != nil else {
            outbox.send(
                CCSWire.answer(
                    Self.nack(messageID, to: fields["to"]?.string, XMPPWording.badAck)))
            return
        }
        // An ack of something this connection does not hold (acked already, or never sent) is ignored.
        hub.acknowledge(messageID, session: id, project: project)
    }

    static func nack(_ messageID: String, to: String?, _ wording: XMPPWording.Nack) -> String {
        CCSWire.json(XMPPDownstream.nack(messageID, to: to, wording.code, wording.description))
    }

    /// The delivery receipt an accepted message to one token asked for (§5.4): the emulated
    /// device has a message as soon as it is accepted; through the relay, once FCM took it.
    static func receipt(for answer: XMPPDownstream.Answer, messageID: String, project: Project) -> UpstreamMessage? {
        guard answer.accepted, !answer.awaitingFCM, answer.loggedID != nil, let message = answer.message,
            message.options.deliveryReceiptRequested == true, case .token(let token) = message.target,
            answer.isDeviceGroup == false
        else { return nil }
        let id = "dr2:" + messageID
        let json = CCSWire.json([
            "category": message.options.restrictedPackageName ?? project.projectId,
            "data": [
                "message_status": "MESSAGE_SENT_TO_DEVICE", "original_message_id": messageID,
                "device_registration_id": token,
                "message_sent_timestamp": String(Int64(Date().timeIntervalSince1970 * 1000)),
            ],
            "message_id": id, "message_type": "receipt", "time_to_live": 0, "from": CCSWire.domain,
        ])
        return UpstreamMessage(messageID: id, json: json, isReceipt: true)
    }
}
