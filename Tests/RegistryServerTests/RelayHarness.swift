import Delivery
import FCMRelay
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Registry
import RegistryApp
import RegistryServer
import ServiceLifecycle
import TestBackends
import Testing
import XMPPServer

/// A relaying registry in front of an emulator registry that plays FCM: the emulator is served
/// live on a loopback port (it issues the access tokens and judges the tokens, faults included),
/// the relay through the router test client, with its worker running in a service group.
struct RelayHarness: Sendable {
    /// The emulator playing FCM; its project (`test-app`) is the Firebase project.
    let upstream: Fixture
    /// The relay's registry, and its project (`relay-app`).
    let relay: RegistryService
    let project: Project
    /// Calls the relay with its project's server key.
    let client: Fixture.Client
    /// The emulator's service-account file the relay was set up with, and the emulator's URL.
    let serviceAccount: Data
    let upstreamURL: String

    /// Options that keep tests short: a quick poll and lease, three attempts.
    static var testOptions: RelayOptions {
        var options = RelayOptions()
        options.pollInterval = .milliseconds(50)
        options.lease = .seconds(2)
        options.maximumAttempts = 3
        options.answerTimeout = .seconds(10)
        return options
    }

    /// - Parameters:
    ///   - sendingTo: an upstream for the sends other than the emulator (a scripted HTTP/2 server);
    ///     the emulator still grants the access tokens.
    ///   - channel: the engine's channel in place of FCM's (a scripted one).
    static func run(
        options: RelayOptions = testOptions, sendingTo sendUpstream: String? = nil,
        channel: (any DeliveryChannel)? = nil,
        _ body: @escaping @Sendable (RelayHarness) async throws -> Void
    ) async throws {
        let upstream = try await Fixture.make()
        try await upstream.test(.live) { upstreamClient in
            let port = try #require(upstreamClient.client.port)
            let store = try await TestBackend.makeStore()
            let handoff = RelayHandoff()
            let relay = try await RegistryService(
                store: store,
                sink: RelaySink(
                    store: store, limits: Limits(), options: options, handoff: handoff,
                    channels: [channel.map { type(of: $0) } ?? FCMChannel.self]))
            try await relay.startAudience()
            let (project, key) = try await relay.createProject(projectId: "relay-app", senderId: "222000222000")
            let (_, file) = try await upstream.registry.createServiceAccount(
                forProject: "test-app", tokenURI: "http://127.0.0.1:\(port)/token")
            let serviceAccount = try JSONEncoder().encode(file)
            let upstreamURL = sendUpstream ?? "http://127.0.0.1:\(port)"
            try await relay.setRelay(
                projectId: "relay-app", try FCMSettings(serviceAccountJSON: serviceAccount, upstream: upstreamURL).stored)
            let worker = DeliveryWorker(
                registry: relay,
                channels: ChannelRegistry([try channel ?? FCMChannel(options: options, logger: Logger(label: "relay"))]),
                options: options,
                handoff: handoff, logger: Logger(label: "relay"))
            let group = ServiceGroup(services: [worker], logger: Logger(label: "relay"))
            var settings = HTTPSettings()
            settings.port = 0
            let app = buildApplication(
                registry: relay, settings: settings, logger: Logger(label: "relay"), sessions: XMPPHub(registry: relay))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                do {
                    try await app.test(.router) { client in
                        try await body(
                            RelayHarness(
                                upstream: upstream, relay: relay, project: project,
                                client: Fixture.Client(client: client, key: key), serviceAccount: serviceAccount,
                                upstreamURL: upstreamURL))
                    }
                } catch {
                    await group.triggerGracefulShutdown()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    // MARK: - Setting the scene

    /// Tokens the emulator (FCM) knows: it answers UNREGISTERED for any other.
    func registerUpstream(_ tokens: [String]) async throws {
        for token in tokens { _ = try await upstream.registry.registerToken(token, in: upstream.project) }
    }

    /// Subscribes `tokens` to `topic` in the relay's registry.
    func subscribe(_ tokens: [String], to topic: String) async throws {
        let reply = try await client.call(
            .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/\#(topic)","registration_tokens":\#(jsonArray(tokens))}"#)
        #expect(reply.status == .ok)
    }

    func fault(_ kind: InjectedFault.Kind, times: Int?, retryAfter: Int? = nil, token: String?) throws {
        try upstream.registry.injectFault(
            InjectedFault(kind: kind, remaining: times, retryAfter: retryAfter), token: token, in: upstream.project)
    }

    // MARK: - Looking

    /// What FCM (the emulator) received: the v1 messages, one per recipient, oldest first.
    func delivered() async throws -> [JSON] {
        try await upstream.loggedBodies().reversed()
    }

    /// The tokens FCM received messages for.
    func deliveredTokens() async throws -> [String] {
        try await delivered().compactMap { $0["token"]?.string }
    }

    /// The newest logged message id of the relay.
    func newestMessageID() async throws -> String {
        let page = try await relay.loggedMessages(.all, in: project, after: nil, limit: 1)
        return try #require(page.items.first?.id)
    }


    /// A message's delivery counts once nothing is pending (or as they are after `seconds`).
    func settled(_ id: String, within seconds: Double = 20, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> DeliveryCounts
    {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while true {
            let counts = try #require(try await relay.delivery(ofMessage: id, in: project))
            if counts.pending == 0 { return counts }
            if ContinuousClock.now > deadline {
                Issue.record("still pending after \(seconds) s: \(counts)", sourceLocation: sourceLocation)
                return counts
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

extension Fixture {
    /// Every message the registry logged, as its normalized JSON, newest first.
    func loggedBodies() async throws -> [JSON] {
        var messages: [JSON] = []
        var after: String?
        repeat {
            let page = try await registry.loggedMessages(.all, in: project, after: after, limit: 1000)
            messages += try page.items.map { try JSONDecoder().decode(JSON.self, from: Data($0.body.utf8)) }
            after = page.nextAfter
        } while after != nil
        return messages
    }
}

/// Waits until `condition` holds, polling, up to `seconds`; records an issue if it never does.
func waitUntil(
    _ seconds: Double = 20, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("condition did not hold within \(seconds) s", sourceLocation: sourceLocation)
}
