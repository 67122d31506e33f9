import Foundation
import Registry
import Synchronization
import TestBackends
import Testing
@testable import XMPPServer

/// Servers on one database, each with the hub of its XMPP listener: upstream messages and
/// receipts reach a session wherever it is, through the store.
@Suite("XMPP across servers", .onEveryBackend)
struct XMPPAcrossServersTests {
    /// `count` hubs, each over a store of its own on one database (as servers are), polling
    /// every 20 ms, with `lease`.
    static func hubs(_ count: Int, lease: Duration = .seconds(30), receiptAckTimeout: Duration = .seconds(30)) async throws
        -> (Fixture, [XMPPHub])
    {
        let fixture = try await Fixture.make()
        let backend = try #require(fixture.registry.store as? any RegistryBackend)
        var limits = XMPPHub.Limits()
        limits.upstreamPollInterval = .milliseconds(20)
        limits.upstreamLease = lease
        limits.receiptAckTimeout = receiptAckTimeout
        var hubs = [XMPPHub(limits: limits, registry: fixture.registry)]
        for _ in 1..<count {
            // Each server has a registry of its own over its own store, as `serve` does.
            let registry = try await RegistryService(store: TestBackend.reopen(backend))
            hubs.append(XMPPHub(limits: limits, registry: registry))
        }
        return (fixture, hubs)
    }

    /// A bound session on `hub`, and what it is sent.
    final class Session: Sendable {
        final class Inbox: Sendable {
            let stanzas = Mutex<[String]>([])
        }

        let id: String
        let inbox = Inbox()
        private let reader: Task<Void, Never>

        init(on hub: XMPPHub, project: Project) throws {
            let outbox = XMPPOutbox(limitBytes: 1 << 20) { _ in }
            guard case .registered(let id) = hub.register(project: project, jid: "app@gcm.googleapis.com", outbox: outbox) else {
                throw SessionRefused()
            }
            self.id = id
            let inbox = inbox
            reader = Task {
                for await item in outbox.stream {
                    if case .stanza(let text) = item { inbox.stanzas.withLock { $0.append(text) } }
                }
            }
            hub.bind(id, project: project, jid: "app@gcm.googleapis.com/r")
        }

        deinit { reader.cancel() }

        /// Whether a stanza naming `messageID` arrives within ten seconds (a loaded machine's).
        func receives(_ messageID: String) async throws -> Bool {
            for _ in 0..<1000 {
                if inbox.stanzas.withLock({ $0.contains { $0.contains(messageID) } }) { return true }
                try await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
    }

    struct SessionRefused: Error {}

    func upstream(_ id: String) -> UpstreamMessage {
        UpstreamMessage(messageID: id, json: #"{"message_id":"\#(id)","from":"device","category":"app","data":{}}"#, isReceipt: false)
    }

    /// Runs each hub's poll loop while `body` runs.
    func running(_ hubs: [XMPPHub], _ body: () async throws -> Void) async throws {
        let loops = hubs.map { hub in Task { try? await hub.run() } }
        do {
            try await body()
        } catch {
            for loop in loops { loop.cancel() }
            throw error
        }
        for loop in loops {
            loop.cancel()
            await loop.value
        }
    }

    func rows(_ fixture: Fixture) async throws -> Int {
        try await TestBackend.rowCount("upstreamMessage", in: try #require(fixture.registry.store as? any RegistryBackend))
    }

    @Test("A message posted to a server with no session reaches the session on another; its ack takes it out of the store")
    func postedElsewhere() async throws {
        let (fixture, hubs) = try await Self.hubs(2)
        let session = try Session(on: hubs[0], project: fixture.project)
        // Posted where no session is, it waits (behind none, or already claimed by the first server).
        let delivery = try await hubs[1].deliver(upstream("u-far"), to: fixture.project)
        #expect(delivery == .waiting(position: 1) || delivery == .waiting(position: 0), "\(delivery)")
        try await running(hubs) { () async throws in
            #expect(try await session.receives("u-far"))
            #expect(try await hubs[1].waitingCount(of: fixture.project) == 0)
            #expect(hubs[0].acknowledge("u-far", session: session.id, project: fixture.project))
            let store = try #require(fixture.registry.store as? any RegistryBackend)
            for _ in 0..<100 where try await TestBackend.rowCount("upstreamMessage", in: store) > 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await TestBackend.rowCount("upstreamMessage", in: store) == 0)
        }
    }

    @Test("What a session leaves unacknowledged goes to a session on another server")
    func handedBack() async throws {
        let (fixture, hubs) = try await Self.hubs(2)
        let first = try Session(on: hubs[0], project: fixture.project)
        #expect(try await hubs[0].deliver(upstream("u-1"), to: fixture.project) == .sent(connection: first.id))
        let second = try Session(on: hubs[1], project: fixture.project)
        try await running(hubs) { () async throws in
            hubs[0].remove(first.id, project: fixture.project)
            #expect(try await second.receives("u-1"))
        }
    }

    @Test("What a dead server held goes to another server's session once the lease runs out, and not before")
    func deadServer() async throws {
        let (fixture, hubs) = try await Self.hubs(2, lease: .seconds(3))
        // The first server's session takes the message, then the server dies: no ack, no renewal.
        let doomed = try Session(on: hubs[0], project: fixture.project)
        #expect(try await hubs[0].deliver(upstream("u-held"), to: fixture.project) == .sent(connection: doomed.id))
        // Held, so waiting for no one.
        #expect(try await hubs[1].waitingCount(of: fixture.project) == 0)
        let survivor = try Session(on: hubs[1], project: fixture.project)
        try await running([hubs[1]]) { () async throws in
            #expect(try await survivor.receives("u-held"))
        }
    }

    @Test("A receipt goes to the session that sent the message when it has room, and waits in the store when none has")
    func receipts() async throws {
        let (fixture, hubs) = try await Self.hubs(2)
        let near = try Session(on: hubs[0], project: fixture.project)
        let receipt = UpstreamMessage(messageID: "dr2:m1", json: #"{"message_id":"dr2:m1"}"#, isReceipt: true)
        #expect(try await hubs[0].deliver(receipt, to: fixture.project, preferring: near.id) == .sent(connection: near.id))
        // The app server acknowledges a receipt without its prefix too.
        #expect(hubs[0].acknowledge("m1", session: near.id, project: fixture.project))
        hubs[0].remove(near.id, project: fixture.project)
        let later = UpstreamMessage(messageID: "dr2:m2", json: #"{"message_id":"dr2:m2"}"#, isReceipt: true)
        #expect(try await hubs[0].deliver(later, to: fixture.project) == .waiting(position: 1))
        let far = try Session(on: hubs[1], project: fixture.project)
        try await running(hubs) { () async throws in
            #expect(try await far.receives("dr2:m2"))
        }
    }

    @Test("A live server keeps what its sessions hold past the lease: it renews its claims")
    func renewed() async throws {
        // Renewed every second, the claim outlives its 3 s lease on a loaded machine too.
        let (fixture, hubs) = try await Self.hubs(2, lease: .seconds(3))
        let holding = try Session(on: hubs[0], project: fixture.project)
        #expect(try await hubs[0].deliver(upstream("u-kept"), to: fixture.project) == .sent(connection: holding.id))
        let idle = try Session(on: hubs[1], project: fixture.project)
        try await running(hubs) { () async throws in
            try await Task.sleep(for: .seconds(5))
            #expect(idle.inbox.stanzas.withLock { $0.isEmpty })
        }
    }

    @Test("A receipt the app server never acknowledges leaves its session and the store after the receipt ack timeout")
    func expiredReceipts() async throws {
        let (fixture, hubs) = try await Self.hubs(1, receiptAckTimeout: .milliseconds(200))
        let session = try Session(on: hubs[0], project: fixture.project)
        let receipt = UpstreamMessage(messageID: "dr2:m9", json: #"{"message_id":"dr2:m9"}"#, isReceipt: true)
        #expect(try await hubs[0].deliver(receipt, to: fixture.project) == .sent(connection: session.id))
        #expect(try await rows(fixture) == 1)
        try await running(hubs) { () async throws in
            for _ in 0..<100 where try await rows(fixture) > 0 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(try await rows(fixture) == 0)
            #expect(hubs[0].sessions(of: fixture.project).first?.unackedUpstream == 0)
        }
    }

    @Test("Of two sessions, a receipt goes to the one preferred; other messages to the one with the most room")
    func preferredSession() async throws {
        let (fixture, hubs) = try await Self.hubs(1)
        let first = try Session(on: hubs[0], project: fixture.project)
        let second = try Session(on: hubs[0], project: fixture.project)
        let receipt = UpstreamMessage(messageID: "dr2:m3", json: #"{"message_id":"dr2:m3"}"#, isReceipt: true)
        #expect(try await hubs[0].deliver(receipt, to: fixture.project, preferring: second.id) == .sent(connection: second.id))
        // The next goes to the session with the most room: the first.
        #expect(try await hubs[0].deliver(upstream("u-a"), to: fixture.project) == .sent(connection: first.id))
        for name in ["u-b", "u-c"] { _ = try await hubs[0].deliver(upstream(name), to: fixture.project) }
        #expect(hubs[0].sessions(of: fixture.project).map(\.unackedUpstream) == [2, 2])
    }

    @Test("A message id repeated while unacknowledged takes the earlier one's place: one ack settles it")
    func repeatedID() async throws {
        let (fixture, hubs) = try await Self.hubs(1)
        let session = try Session(on: hubs[0], project: fixture.project)
        _ = try await hubs[0].deliver(upstream("u-same"), to: fixture.project)
        _ = try await hubs[0].deliver(upstream("u-same"), to: fixture.project)
        #expect(hubs[0].sessions(of: fixture.project).first?.unackedUpstream == 1)
        #expect(try await rows(fixture) == 1)
        #expect(hubs[0].acknowledge("u-same", session: session.id, project: fixture.project))
        for _ in 0..<100 where try await rows(fixture) > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(try await rows(fixture) == 0)
    }
}
