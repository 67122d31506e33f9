import AudienceEngine
import Delivery
import FCMRelay
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Registry
import RegistryServer
import ServiceLifecycle
import Synchronization
import TestBackends
import Testing
import Webhooks

/// `/api/webhooks`: created with a secret shown once, listed and shown without it, deleted,
/// rotated; another project's key finds none of it.
@Suite("Webhook API", .onEveryBackend)
struct WebhookAPITests {
    static let create = #"{"url":"https://93.184.215.14/hooks","events":["token.unregistered","message.completed"]}"#

    @Test("POST answers 201 with the secret; GET shows no secret; DELETE answers 204, then 404")
    func lifecycle() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let created = try await client.call(.post, "/api/webhooks", body: Self.create)
            #expect(created.status == .created)
            let id = try #require(created.json?["id"]?.string)
            let secret = try #require(created.json?["secret"]?.string)
            #expect(id.hasPrefix("wh_"))
            #expect(secret.hasPrefix("whsec_") && (Data(base64Encoded: String(secret.dropFirst(6)))?.count ?? 0) >= 24)
            #expect(created.json?["events"] == ["token.unregistered", "message.completed"])
            #expect(created.json?["createdAt"]?.string != nil)
            let shown = try await client.call(.get, "/api/webhooks/\(id)")
            #expect(shown.status == .ok)
            #expect(shown.json?["secret"] == nil)
            #expect(shown.json?["backlog"] == 0)
            #expect(shown.json?["disabled"] == false)
            #expect(shown.json?["url"]?.string == "https://93.184.215.14/hooks")
            let list = try await client.call(.get, "/api/webhooks")
            #expect(list.json?["webhooks"]?.array?.count == 1)
            #expect(list.json?["webhooks"]?.array?.first?["secret"] == nil)
            let rotated = try await client.call(.post, "/api/webhooks/\(id):rotateSecret")
            #expect(rotated.status == .ok)
            let newSecret = try #require(rotated.json?["secret"]?.string)
            #expect(newSecret != secret && newSecret.hasPrefix("whsec_"))
            #expect(try await client.call(.get, "/api/webhooks/\(id)").json?["previousSecretExpiresAt"]?.string != nil)
            #expect(try await client.call(.delete, "/api/webhooks/\(id)").status == .noContent)
            #expect(try await client.call(.get, "/api/webhooks/\(id)").status == .notFound)
            #expect(try await client.call(.delete, "/api/webhooks/\(id)").status == .notFound)
        }
    }

    @Test("Another project's key gets 404 for every route of a webhook")
    func otherProject() async throws {
        let fixture = try await Fixture.make()
        let (_, otherKey) = try await fixture.registry.createProject(projectId: "other", senderId: "999000999000")
        try await fixture.test { client in
            let id = try #require(try await client.call(.post, "/api/webhooks", body: Self.create).json?["id"]?.string)
            let other = "key=\(otherKey)"
            #expect(try await client.call(.get, "/api/webhooks/\(id)", auth: .some(other)).status == .notFound)
            #expect(try await client.call(.delete, "/api/webhooks/\(id)", auth: .some(other)).status == .notFound)
            #expect(
                try await client.call(.post, "/api/webhooks/\(id):rotateSecret", auth: .some(other)).status == .notFound
            )
            #expect(try await client.call(.post, "/api/webhooks/\(id):enable", auth: .some(other)).status == .notFound)
            #expect(try await client.call(.post, "/api/webhooks/\(id):retry", auth: .some(other)).status == .notFound)
            #expect(try await client.call(.get, "/api/webhooks", auth: .some(other)).json?["webhooks"] == [])
            #expect(try await client.call(.get, "/api/webhooks/\(id)").status == .ok)
        }
    }

    @Test("POST :enable turns a disabled webhook on again with its id and secret; its queue is sent at once")
    func enable() async throws {
        let fixture = try await Fixture.make()
        let store = try #require(fixture.registry.store as? any RegistryBackend)
        let url = "https://93.184.215.14/hooks"
        try await fixture.test { client in
            let created = try await client.call(
                .post, "/api/webhooks", body: #"{"url":"\#(url)","events":["delivery.failed"]}"#)
            let id = try #require(created.json?["id"]?.string)
            let secret = try #require(created.json?["secret"]?.string)
            // Enabling a webhook that is on changes nothing.
            let fresh = try await client.call(.get, "/api/webhooks/\(id)")
            let noop = try await client.call(.post, "/api/webhooks/\(id):enable")
            #expect(noop.status == .ok)
            #expect(noop.json == fresh.json)
            // Two failures queued; every attempt fails for 3 days and the webhook is disabled.
            try await WebhookDeliveryTests.queueEvents(fixture.registry, fixture.project)
            let start = Date()
            let events = try await store.claimWebhookEvents(
                "w", leaseUntil: start.addingTimeInterval(60), now: start, limit: 10)
            #expect(events.count == 2)
            _ = try await store.recordWebhookAttempt(
                events[0], .failed("HTTP 502"), claimant: "w", schedule: .standard, now: start)
            let later = start.addingTimeInterval(WebhookRules.disableAfter + 1)
            _ = try await store.recordWebhookAttempt(
                events[1], .failed("HTTP 502"), claimant: "w", schedule: .standard, now: later)
            let disabled = try await client.call(.get, "/api/webhooks/\(id)")
            #expect(disabled.json?["disabled"] == true)
            #expect(disabled.json?["disabledReason"]?.string?.contains("HTTP 502") == true)

            let enabled = try await client.call(.post, "/api/webhooks/\(id):enable")
            #expect(enabled.status == .ok)
            #expect(enabled.json?["id"]?.string == id)
            #expect(enabled.json?["disabled"] == false)
            #expect(enabled.json?["disabledAt"] == nil)
            #expect(enabled.json?["disabledReason"] == nil)
            #expect(enabled.json?["failingSince"] == nil)
            #expect(enabled.json?["backlog"] == 2)
            #expect(enabled.json?["lastError"] == "HTTP 502")
            #expect(enabled.json?["secret"] == nil)
            #expect(enabled.json == (try await client.call(.get, "/api/webhooks/\(id)").json))
            // Both events are due now, the one retried 3 days ahead too, and signed with the first secret.
            let now = Date()
            let again = try await store.claimWebhookEvents(
                "w2", leaseUntil: now.addingTimeInterval(60), now: now, limit: 10)
            #expect(Set(again.map(\.eventID)) == Set(events.map(\.eventID)))
            let event = try #require(again.first)
            #expect(event.secret == secret && event.previousSecret == nil)
            try await WebhookDeliveryTests.receiver { port, received in
                var local = event
                local.url = "http://127.0.0.1:\(port)/hook"
                let channel = HTTPWebhookChannel(options: WebhookDeliveryTests.options())
                #expect(await channel.send(local) == .delivered)
                await channel.shutdown()
                let got = try #require(received.withLock { $0.first })
                #expect(got.id == event.eventID && got.body == event.payload)
                let timestamp = try #require(Int64(got.timestamp))
                #expect(
                    got.signature
                        == WebhookSignature.sign(id: got.id, timestamp: timestamp, body: got.body, secret: secret))
            }
            // Enabled, it is unchanged by another :enable.
            let shown = try await client.call(.get, "/api/webhooks/\(id)")
            let twice = try await client.call(.post, "/api/webhooks/\(id):enable")
            #expect(twice.status == .ok)
            #expect(twice.json == shown.json)
            // An unknown id: 404 in the native envelope.
            let unknown = try await client.call(.post, "/api/webhooks/wh_unknown:enable")
            #expect(unknown.status == .notFound)
            #expect(unknown.json?["error"]?["code"] == "not_found")
            #expect(unknown.json?["error"]?["message"] == "no webhook has this id in the project")
        }
    }

    @Test("POST :retry makes a failing webhook's waiting events due now; GET shows its error's time and next attempt")
    func retryNow() async throws {
        let fixture = try await Fixture.make()
        let store = try #require(fixture.registry.store as? any RegistryBackend)
        try await fixture.test { client in
            let created = try await client.call(
                .post, "/api/webhooks", body: #"{"url":"https://93.184.215.14/hooks","events":["delivery.failed"]}"#)
            let id = try #require(created.json?["id"]?.string)
            // Nothing waits: no next attempt, and retrying changes nothing.
            let idle = try await client.call(.get, "/api/webhooks/\(id)")
            #expect(idle.json?["nextAttemptAt"] == nil && idle.json?["lastErrorAt"] == nil)
            let noop = try await client.call(.post, "/api/webhooks/\(id):retry")
            #expect(noop.status == .ok && noop.json == idle.json)
            // Two events fail once; the next try is an hour away.
            try await WebhookDeliveryTests.queueEvents(fixture.registry, fixture.project)
            let start = Date()
            let schedule = WebhookRetrySchedule(waits: [.seconds(3600)])
            for event in try await store.claimWebhookEvents(
                "w", leaseUntil: start.addingTimeInterval(60), now: start, limit: 10)
            {
                _ = try await store.recordWebhookAttempt(
                    event, .failed("HTTP 503"), claimant: "w", schedule: schedule, now: start)
            }
            let failing = try await client.call(.get, "/api/webhooks/\(id)")
            let lastErrorAt = try #require(failing.json?["lastErrorAt"]?.string)
            let nextAttemptAt = try #require(failing.json?["nextAttemptAt"]?.string)
            let dates = ISO8601DateFormatter()
            dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let parse = { (text: String) in dates.date(from: text) ?? ISO8601DateFormatter().date(from: text) }
            let next = try #require(parse(nextAttemptAt))
            let met = try #require(parse(lastErrorAt))
            #expect(next.timeIntervalSince(met) > 3500)
            #expect(try await store.claimWebhookEvents("w2", leaseUntil: Date(), now: Date(), limit: 10).isEmpty)

            let retried = try await client.call(.post, "/api/webhooks/\(id):retry")
            #expect(retried.status == .ok)
            #expect(retried.json?["id"]?.string == id && retried.json?["backlog"] == 2)
            #expect(retried.json?["lastError"] == "HTTP 503")
            let dueText = try #require(retried.json?["nextAttemptAt"]?.string)
            let due = try #require(parse(dueText))
            #expect(due <= Date())
            let again = try await store.claimWebhookEvents(
                "w2", leaseUntil: Date().addingTimeInterval(60), now: Date(), limit: 10)
            #expect(again.count == 2 && again.allSatisfy { $0.attempts == 1 })
            let unknown = try await client.call(.post, "/api/webhooks/wh_unknown:retry")
            #expect(unknown.status == .notFound)
            #expect(unknown.json?["error"]?["code"] == "not_found")
        }
    }

    @Test(
        "URLs that are not https or reach a private address, and unknown events, are refused with 400",
        arguments: [
            #"{"url":"http://93.184.215.14/h","events":["delivery.failed"]}"#,
            #"{"url":"https://127.0.0.1/h","events":["delivery.failed"]}"#,
            #"{"url":"https://localhost/h","events":["delivery.failed"]}"#,
            #"{"url":"https://169.254.169.254/latest/meta-data","events":["delivery.failed"]}"#,
            #"{"url":"https://[::ffff:10.0.0.1]/h","events":["delivery.failed"]}"#,
            #"{"url":"https://93.184.215.14/h","events":[]}"#,
            #"{"url":"https://93.184.215.14/h","events":["token.deleted"]}"#,
            #"{"url":"https://93.184.215.14/h"}"#,
        ])
    func refused(_ body: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(.post, "/api/webhooks", body: body)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["message"]?.string != nil)
            #expect(try await client.call(.get, "/api/webhooks").json?["webhooks"] == [])
        }
    }

    @Test("The 17th webhook of a project is refused")
    func limit() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for _ in 0..<16 {
                #expect(try await client.call(.post, "/api/webhooks", body: Self.create).status == .created)
            }
            let refused = try await client.call(.post, "/api/webhooks", body: Self.create)
            #expect(refused.status == .badRequest)
            #expect(refused.json?["error"]?["message"]?.string?.contains("16") == true)
        }
    }
}

/// The HTTP channel against a real receiver on a loopback port, and the worker that drains the queue.
@Suite("Webhook delivery", .onEveryBackend)
struct WebhookDeliveryTests {
    /// What a receiver got: the headers that matter and the body.
    struct Received: Sendable {
        var id: String
        var timestamp: String
        var signature: String
        var body: String
    }

    /// What a receiver got, in order.
    final class Inbox: Sendable {
        private let items = Mutex<[Received]>([])

        func withLock<T: Sendable>(_ body: (inout [Received]) -> T) -> T { items.withLock { body(&$0) } }
    }

    /// Runs a receiver answering `status` (and `location` for a redirect), then `body` with its port.
    static func receiver(
        status: HTTPResponse.Status = .noContent, delay: Duration = .zero,
        _ body: @escaping @Sendable (Int, Inbox) async throws -> Void
    ) async throws {
        let received = Inbox()
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            received.withLock {
                $0.append(
                    Received(
                        id: request.headers[HTTPField.Name("webhook-id")!] ?? "",
                        timestamp: request.headers[HTTPField.Name("webhook-timestamp")!] ?? "",
                        signature: request.headers[HTTPField.Name("webhook-signature")!] ?? "",
                        body: String(buffer: bytes)))
            }
            if delay > .zero { try await Task.sleep(for: delay) }
            var headers: HTTPFields = [:]
            if status == .found { headers[.location] = "http://127.0.0.1:1/elsewhere" }
            return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "ok")))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            try await body(try #require(client.port), received)
        }
    }

    static func delivery(port: Int, secret: String, previous: String? = nil) -> WebhookDelivery {
        WebhookDelivery(
            id: 1, webhook: 1, webhookID: "wh_test", project: 1, eventID: "msg_test", type: "message.completed",
            payload: #"{"type":"message.completed","timestamp":"2026-01-01T00:00:00.000Z","data":{}}"#, attempts: 0,
            url: "http://127.0.0.1:\(port)/hook", secret: secret, previousSecret: previous)
    }

    /// - Parameter timeout: an attempt's; long enough by default that a loaded machine's local
    ///   receiver answers within it.
    static func options(allowPrivate: Bool = true, timeout: Duration = .seconds(10)) -> WebhookOptions {
        var options = WebhookOptions()
        options.allowPrivateNetworks = allowPrivate
        options.timeout = timeout
        options.pollInterval = .milliseconds(50)
        options.lease = .seconds(5)
        return options
    }

    @Test("An event arrives signed with both secrets during a rotation, with its id and a current timestamp")
    func signed() async throws {
        let secret = WebhookRules.makeSecret()
        let previous = WebhookRules.makeSecret()
        try await Self.receiver { port, received in
            let channel = HTTPWebhookChannel(options: Self.options())
            let result = await channel.send(Self.delivery(port: port, secret: secret, previous: previous))
            #expect(result == .delivered)
            let got = try #require(received.withLock { $0.first })
            #expect(got.id == "msg_test")
            let timestamp = try #require(Int64(got.timestamp))
            #expect(abs(timestamp - Int64(Date().timeIntervalSince1970)) < 60)
            #expect(got.body == Self.delivery(port: port, secret: secret).payload)
            let expected = [secret, previous].map {
                WebhookSignature.sign(id: got.id, timestamp: timestamp, body: got.body, secret: $0)!
            }
            #expect(got.signature == expected.joined(separator: " "))
        }
    }

    @Test("A loopback receiver is refused at the connection unless private networks are allowed")
    func refusedAtConnection() async throws {
        try await Self.receiver { port, received in
            let strict = HTTPWebhookChannel(options: Self.options(allowPrivate: false))
            let result = await strict.send(Self.delivery(port: port, secret: WebhookRules.makeSecret()))
            guard case .failed(let error) = result else {
                Issue.record("sent to a loopback address: \(result)")
                return
            }
            #expect(error.contains("https") || error.contains("not a public address"))
            var https = Self.delivery(port: port, secret: WebhookRules.makeSecret())
            https.url = "https://127.0.0.1:\(port)/hook"
            guard case .failed(let refusal) = await strict.send(https) else {
                Issue.record("sent to a loopback address")
                return
            }
            #expect(refusal.contains("not a public address"))
            #expect(received.withLock { $0.isEmpty })
        }
    }

    @Test("A redirect is not followed, an error status fails, a slow answer times out")
    func hostileAnswers() async throws {
        try await Self.receiver(status: .found) { port, received in
            let result = await HTTPWebhookChannel(options: Self.options()).send(
                Self.delivery(port: port, secret: WebhookRules.makeSecret()))
            #expect(result == .failed("HTTP 302: ok"))
            #expect(received.withLock { $0.count } == 1)
        }
        try await Self.receiver(status: .serviceUnavailable) { port, _ in
            let result = await HTTPWebhookChannel(options: Self.options()).send(
                Self.delivery(port: port, secret: WebhookRules.makeSecret()))
            #expect(result == .failed("HTTP 503: ok"))
        }
        try await Self.receiver(delay: .seconds(3)) { port, _ in
            let started = ContinuousClock.now
            let result = await HTTPWebhookChannel(options: Self.options(timeout: .seconds(1))).send(
                Self.delivery(port: port, secret: WebhookRules.makeSecret()))
            guard case .failed = result else {
                Issue.record("a stalled answer counted: \(result)")
                return
            }
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    /// A channel that fails each event's first attempt, then delivers, and remembers what it sent.
    final class FlakyChannel: WebhookChannel {
        let sent = Mutex<[String]>([])

        func send(_ delivery: WebhookDelivery) async -> WebhookAttemptResult {
            sent.withLock { $0.append(delivery.eventID) }
            return delivery.attempts == 0 ? .failed("HTTP 503") : .delivered
        }

        func shutdown() async {}
    }

    /// A channel whose attempts take `delay`, then deliver.
    final class SlowChannel: WebhookChannel {
        let delay: Duration
        let started = Mutex<[String]>([])

        init(delay: Duration) { self.delay = delay }

        func send(_ delivery: WebhookDelivery) async -> WebhookAttemptResult {
            started.withLock { $0.append(delivery.eventID) }
            try? await Task.sleep(for: delay)
            return .delivered
        }

        func shutdown() async {}
    }

    @Test("The worker sends every queued event, retries a failure on the schedule, and stops cleanly")
    func worker() async throws {
        let (registry, project, store) = try await Self.queuedEvents()
        // Two prunes, two failures, the completion.
        var options = Self.options()
        options.retrySchedule = WebhookRetrySchedule(waits: [.milliseconds(100)])
        let channel = FlakyChannel()
        let worker = WebhookWorker(
            registry: registry, channel: channel, options: options, serverID: "s1", keepsItsName: true,
            logger: Logger(label: "webhooks"))
        let group = ServiceGroup(services: [worker], logger: Logger(label: "webhooks"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline, try await TestBackend.rowCount("webhookEvent", in: store) > 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let sent = channel.sent.withLock { $0 }
        #expect(sent.count == 10)
        #expect(Set(sent).count == 5)
        let shown = try #require(try await registry.webhooks(in: project).first)
        #expect((shown.sent, shown.failed, shown.backlog) == (5, 0, 0))
        #expect(shown.failingSince == nil)
    }

    @Test("On SIGTERM the attempts in flight end and are recorded, and nothing stays claimed")
    func gracefulStop() async throws {
        let (registry, project, store) = try await Self.queuedEvents()
        var options = Self.options()
        options.concurrency = 2
        let channel = SlowChannel(delay: .milliseconds(700))
        let worker = WebhookWorker(
            registry: registry, channel: channel, options: options, serverID: "s1", keepsItsName: true,
            logger: Logger(label: "webhooks"))
        let group = ServiceGroup(services: [worker], logger: Logger(label: "webhooks"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            while channel.started.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(10)) }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        // The two in flight were delivered and recorded; the other three wait, claimable by anyone now.
        let shown = try #require(try await registry.webhooks(in: project).first)
        #expect((shown.sent, shown.backlog) == (2, 3))
        let now = Date()
        #expect(
            try await store.claimWebhookEvents("s2", leaseUntil: now.addingTimeInterval(60), now: now, limit: 10).count
                == 3)
    }

    /// A project with one webhook for every event type, and the five events of a topic send to
    /// two dead tokens queued.
    static func queuedEvents() async throws -> (RegistryService, Project, any RegistryBackend) {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let (project, _) = try await registry.createProject(projectId: "p", senderId: "123456789012")
        let store = try #require(registry.store as? any RegistryBackend)
        _ = try await store.createWebhook(
            project: project.rowID, url: "https://93.184.215.14/h", events: WebhookEventType.allCases, limit: 16,
            now: Date())
        try await queueEvents(registry, project)
        return (registry, project, store)
    }

    /// Queues the events of a topic send to two dead tokens for the project's webhooks: a prune
    /// and a failure each, and the completion.
    static func queueEvents(_ registry: RegistryService, _ project: Project) async throws {
        let store = try #require(registry.store as? any RegistryBackend)
        _ = try await registry.subscribe([token(1), token(2)], to: "news", in: project)
        try await store.setRelay(
            RelayRulesTests.settings.stored, for: project)
        let message = AcceptedMessage(
            id: "m1", project: project, via: .legacy, message: Message(target: .topic("news")),
            recipients: RoaringBitmap([1, 2]), receivedAt: Date())
        _ = try await store.enqueue(
            message, body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: nil, claimant: nil,
            leaseUntil: Date(), bounds: OutboxBounds(outboxMessages: 10, logEntries: 10, logBytes: 1 << 20))
        let job = try #require(
            try await store.claim("a", leaseUntil: Date().addingTimeInterval(30), now: Date(), limit: 1).first)
        let page = try await store.nextAttempts(of: job, after: nil, now: Date(), limit: 10)
        _ = try await store.record(
            page.attempts.map {
                DeliveryOutcome(attempt: $0, state: .failed, error: "UNREGISTERED", nextAttemptAt: nil, gone: true)
            },
            of: job, page: page, claimant: "a", leaseUntil: Date(), now: Date())
    }
}
