import Foundation
import TestBackends
import Testing

@testable import AudienceEngine
@testable import Registry

/// Webhooks in the store: events queued in the outbox's own transaction for the webhooks that
/// asked for them, the queue's claims, leases, retries and give-up, disabling, secrets.
@Suite("Webhooks", .onEveryBackend)
struct WebhookTests {
    static let settings = OutboxTests.settings
    static let everything = WebhookEventType.allCases
    static let url = "https://93.184.215.14/hooks"

    /// A relaying project with `count` subscribers of `news`, a topic send to them claimed by "a",
    /// and its first page of `count` attempts.
    func claimedSend(_ count: Int, hooks: [[WebhookEventType]]) async throws
        -> (any RegistryBackend, Project, OutboxJob, AttemptPage, [CreatedWebhook])
    {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.subscribe((1...count).map(token), to: "news", in: project)
        let store = try #require(registry.store as? any RegistryBackend)
        try await store.setRelay(Self.settings, for: project)
        var created: [CreatedWebhook] = []
        for events in hooks {
            created.append(
                try await store.createWebhook(
                    project: project.rowID, url: Self.url, events: events, limit: 16, now: Date()))
        }
        let message = AcceptedMessage(
            id: "m1", project: project, via: .legacy, message: Message(target: .topic("news")),
            recipients: RoaringBitmap((1...count).map(UInt32.init)), receivedAt: Date())
        _ = try await store.enqueue(
            message, body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: nil, claimant: nil,
            leaseUntil: Date(), bounds: OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20))
        let now = Date()
        let job = try #require(
            try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 1).first)
        let page = try await store.nextAttempts(of: job, after: nil, now: now, limit: count + 1)
        return (store, project, job, page, created)
    }

    /// - Parameter gone: the channel said the token is gone (its verdict's type, whatever its words).
    func outcome(_ attempt: DeliveryAttempt, _ state: DeliveryState, _ error: String? = nil, gone: Bool = false)
        -> DeliveryOutcome
    {
        DeliveryOutcome(
            attempt: attempt, state: state, error: error,
            nextAttemptAt: state == .pending ? Date().addingTimeInterval(5) : nil, gone: gone)
    }

    /// Every queued event, claimed at `now` by "w".
    func queued(_ store: any RegistryBackend, at now: Date = Date()) async throws -> [WebhookDelivery] {
        try await store.claimWebhookEvents("w", leaseUntil: now.addingTimeInterval(60), now: now, limit: 1000)
    }

    func data(_ delivery: WebhookDelivery) throws -> [String: Any] {
        let body = try #require(JSONSerialization.jsonObject(with: Data(delivery.payload.utf8)) as? [String: Any])
        #expect(body["type"] as? String == delivery.type)
        #expect((body["timestamp"] as? String)?.hasSuffix("Z") == true)
        return try #require(body["data"] as? [String: Any])
    }

    @Test("A recorded page queues its events, in its transaction, for the webhooks subscribed to each type")
    func eventsForSubscribers() async throws {
        let (store, project, job, page, hooks) = try await claimedSend(
            4, hooks: [Self.everything, [.messageCompleted], [.deliveryFailed]])
        let a = page.attempts
        let outcomes = [
            outcome(a[0], .delivered), outcome(a[1], .failed, "UNREGISTERED", gone: true),
            outcome(a[2], .failed, "SENDER_ID_MISMATCH", gone: true),
            outcome(a[3], .failed, "INVALID_ARGUMENT"),
        ]
        let progress = try await store.record(
            outcomes, of: job, page: page, claimant: "a", leaseUntil: Date(), now: Date())
        #expect(progress?.finished == true)
        let events = try await queued(store)
        let byHook = Dictionary(grouping: events, by: \.webhookID)
        // All types: two prunes, three failures, the completion. Completion only: one. Failures only: three.
        #expect(byHook[hooks[0].webhook.id]?.count == 6)
        #expect(byHook[hooks[1].webhook.id]?.map(\.type) == ["message.completed"])
        #expect(byHook[hooks[2].webhook.id]?.map(\.type) == Array(repeating: "delivery.failed", count: 3))
        let first = try #require(byHook[hooks[0].webhook.id])
        let unregistered = try first.filter { $0.type == "token.unregistered" }.map { try data($0) }
        #expect(Set(unregistered.compactMap { $0["reason"] as? String }) == ["UNREGISTERED", "SENDER_ID_MISMATCH"])
        #expect(Set(unregistered.compactMap { $0["token"] as? String }) == [a[1].token, a[2].token])
        #expect(
            unregistered.allSatisfy {
                $0["projectId"] as? String == project.projectId && $0["messageId"] as? String == "m1"
            })
        let failed = try first.filter { $0.type == "delivery.failed" }.map { try data($0) }
        #expect(
            Set(failed.compactMap { $0["error"] as? String }) == [
                "UNREGISTERED", "SENDER_ID_MISMATCH", "INVALID_ARGUMENT",
            ])
        let completed = try #require(first.first { $0.type == "message.completed" })
        let counts = try data(completed)
        #expect(counts["delivered"] as? Int == 1)
        #expect(counts["failed"] as? Int == 3)
        // One event, one id, whichever webhook it goes to; each event its own.
        #expect(completed.eventID == byHook[hooks[1].webhook.id]?.first?.eventID)
        #expect(Set(first.map(\.eventID)).count == 6)
        #expect(first.allSatisfy { $0.eventID.hasPrefix("msg_") && $0.attempts == 0 && $0.url == Self.url })
        #expect(try await store.webhook(hooks[0].webhook.id, of: project.rowID)?.backlog == 6)
    }

    @Test("No event without a webhook, without a recorded page, or for a token the walk found gone already")
    func noEventsWithoutCause() async throws {
        // No webhook: the page records, nothing is queued.
        let (bare, _, bareJob, barePage, _) = try await claimedSend(2, hooks: [])
        let failing = barePage.attempts.map { outcome($0, .failed, "UNREGISTERED", gone: true) }
        #expect(
            try await bare.record(failing, of: bareJob, page: barePage, claimant: "a", leaseUntil: Date(), now: Date())
                != nil)
        #expect(try await TestBackend.rowCount("webhookEvent", in: bare) == 0)
        // A webhook, but the page recorded by a server that does not hold the job: nothing at all.
        let (store, _, job, page, _) = try await claimedSend(2, hooks: [Self.everything])
        let outcomes = page.attempts.map { outcome($0, .failed, "UNREGISTERED", gone: true) }
        #expect(
            try await store.record(outcomes, of: job, page: page, claimant: "b", leaseUntil: Date(), now: Date()) == nil
        )
        #expect(try await TestBackend.rowCount("webhookEvent", in: store) == 0)
        // A page that does not finish its message and has no failure: nothing either.
        let delivered = [outcome(page.attempts[0], .delivered)]
        var half = page
        half.attempts = [page.attempts[0]]
        half.walked = false
        half.cursor = page.attempts[0].tokenID ?? 0
        _ = try await store.record(delivered, of: job, page: half, claimant: "a", leaseUntil: Date(), now: Date())
        #expect(try await TestBackend.rowCount("webhookEvent", in: store) == 0)
        // A recipient the walk found unregistered since the send: its failure, not a second prune.
        var gone = page
        gone.attempts = []
        gone.alreadyGone = [page.attempts[1]]
        let goneOutcome = [outcome(page.attempts[1], .failed, "UNREGISTERED", gone: true)]
        #expect(
            try await store.record(goneOutcome, of: job, page: gone, claimant: "a", leaseUntil: Date(), now: Date())
                != nil)
        #expect(try await queued(store).map(\.type).sorted() == ["delivery.failed", "message.completed"])
    }

    @Test("An event is claimed by one server at a time, taken over after its lease, and given back by its server")
    func claimsAndLeases() async throws {
        let (store, _, job, page, _) = try await claimedSend(1, hooks: [[.deliveryFailed]])
        _ = try await store.record(
            [outcome(page.attempts[0], .failed, "INVALID_ARGUMENT")], of: job, page: page, claimant: "a",
            leaseUntil: Date(),
            now: Date())
        let now = Date()
        #expect(
            try await store.claimWebhookEvents("a", leaseUntil: now.addingTimeInterval(60), now: now, limit: 10).count
                == 1)
        #expect(
            try await store.claimWebhookEvents("b", leaseUntil: now.addingTimeInterval(60), now: now, limit: 10).isEmpty
        )
        // "a" dies: after its lease, "b" takes the event over, and "a" may not record it any more.
        let later = now.addingTimeInterval(61)
        let taken = try await store.claimWebhookEvents(
            "b", leaseUntil: later.addingTimeInterval(60), now: later, limit: 10)
        #expect(taken.count == 1)
        let event = try #require(taken.first)
        let stale = try await store.recordWebhookAttempt(
            event, .delivered, claimant: "a", schedule: .standard, now: later)
        #expect(stale == .notHeld)
        // "b" starts again under its name: its claims are free at once.
        try await store.releaseWebhookEvents(claimedBy: "b")
        let again = try await store.claimWebhookEvents(
            "c", leaseUntil: later.addingTimeInterval(60), now: later, limit: 10)
        #expect(again.map(\.eventID) == [event.eventID])
    }

    @Test("A failed attempt waits out the schedule; the last one gives the event up; a 2xx takes it off the queue")
    func retriesAndGiveUp() async throws {
        let (store, project, job, page, hooks) = try await claimedSend(2, hooks: [[.deliveryFailed]])
        _ = try await store.record(
            page.attempts.map { outcome($0, .failed, "INVALID_ARGUMENT") }, of: job, page: page, claimant: "a",
            leaseUntil: Date(), now: Date())
        let schedule = WebhookRetrySchedule(waits: [.seconds(5), .seconds(300)])
        var now = Date()
        let events = try await queued(store, at: now)
        #expect(events.count == 2)
        // The first is delivered at once.
        #expect(
            try await store.recordWebhookAttempt(events[0], .delivered, claimant: "w", schedule: schedule, now: now)
                == .delivered)
        // The second fails: tried again after 5 s, then 300 s, then given up.
        var event = events[1]
        for wait in [5.0, 300.0] {
            let outcome = try await store.recordWebhookAttempt(
                event, .failed("HTTP 503"), claimant: "w", schedule: schedule, now: now)
            #expect(outcome == .retried(at: now.addingTimeInterval(wait)))
            #expect(try await queued(store, at: now.addingTimeInterval(wait - 1)).isEmpty)
            now = now.addingTimeInterval(wait)
            event = try #require(try await queued(store, at: now).first)
            #expect(event.eventID == events[1].eventID)
        }
        #expect(event.attempts == 2)
        #expect(
            try await store.recordWebhookAttempt(
                event, .failed("HTTP 500"), claimant: "w", schedule: schedule, now: now) == .gaveUp)
        #expect(try await queued(store, at: now.addingTimeInterval(1000)).isEmpty)
        let shown = try #require(try await store.webhook(hooks[0].webhook.id, of: project.rowID))
        #expect((shown.sent, shown.failed, shown.backlog) == (1, 1, 0))
        #expect(shown.lastError == "HTTP 500")
        #expect(shown.failingSince != nil)
        #expect(shown.disabledAt == nil)
    }

    @Test("The standard schedule retries for more than 24 hours, seconds apart at first")
    func standardSchedule() {
        #expect(WebhookRetrySchedule.standard.total > .seconds(24 * 3600))
        #expect(WebhookRetrySchedule.standard.wait(afterAttempts: 1) == .seconds(5))
        #expect(WebhookRetrySchedule.standard.wait(afterAttempts: 8) == nil)
    }

    @Test("A webhook failing for 3 days is disabled, says why, gets no new events, and its queue is not sent")
    func disabledAfterThreeDays() async throws {
        let (store, project, job, page, hooks) = try await claimedSend(3, hooks: [[.deliveryFailed]])
        _ = try await store.record(
            [
                outcome(page.attempts[0], .failed, "INVALID_ARGUMENT"),
                outcome(page.attempts[1], .failed, "INVALID_ARGUMENT"),
            ],
            of: job,
            page: AttemptPage(attempts: Array(page.attempts.prefix(2)), alreadyGone: [], cursor: 2, walked: false),
            claimant: "a", leaseUntil: Date().addingTimeInterval(30), now: Date())
        let start = Date()
        let events = try await queued(store, at: start)
        #expect(events.count == 2)
        let first = try await store.recordWebhookAttempt(
            events[0], .failed("HTTP 502"), claimant: "w", schedule: .standard, now: start)
        #expect(first == .retried(at: start.addingTimeInterval(5)))
        // Three days of failures later (a success in between would start the count again).
        let later = start.addingTimeInterval(3 * 24 * 3600 + 1)
        let last = try await store.recordWebhookAttempt(
            events[1], .failed("HTTP 502"), claimant: "w", schedule: .standard, now: later)
        guard case .disabled(let reason) = last else {
            Issue.record("not disabled: \(last)")
            return
        }
        #expect(reason.contains("3 days") && reason.contains("HTTP 502"))
        let shown = try #require(try await store.webhook(hooks[0].webhook.id, of: project.rowID))
        #expect(shown.disabledAt != nil)
        #expect(shown.disabledReason == reason)
        // Its queue waits unsent, and a new failure queues nothing for it.
        #expect(try await queued(store, at: later.addingTimeInterval(86_400)).isEmpty)
        let rest = AttemptPage(attempts: [page.attempts[2]], alreadyGone: [], cursor: 3, walked: true)
        _ = try await store.record(
            [outcome(page.attempts[2], .failed, "INVALID_ARGUMENT")], of: job, page: rest, claimant: "a",
            leaseUntil: later,
            now: later)
        #expect(try await store.webhook(hooks[0].webhook.id, of: project.rowID)?.backlog == 2)
    }

    @Test(
        "A disabled webhook enabled again keeps its id, secret, counters and queue, due at once; its 3 days start again"
    )
    func enabledAgain() async throws {
        let (store, project, job, page, hooks) = try await claimedSend(2, hooks: [[.deliveryFailed]])
        let id = hooks[0].webhook.id
        _ = try await store.record(
            page.attempts.map { outcome($0, .failed, "INVALID_ARGUMENT") }, of: job, page: page, claimant: "a",
            leaseUntil: Date(), now: Date())
        // An hour between attempts: an event not due when the webhook is enabled is brought forward.
        let schedule = WebhookRetrySchedule(waits: [.seconds(3600), .seconds(3600)])
        let start = Date()
        let events = try await queued(store, at: start)
        #expect(events.count == 2)
        _ = try await store.recordWebhookAttempt(
            events[0], .failed("HTTP 502"), claimant: "w", schedule: schedule, now: start)
        let later = start.addingTimeInterval(WebhookRules.disableAfter + 1)
        let last = try await store.recordWebhookAttempt(
            events[1], .failed("HTTP 502"), claimant: "w", schedule: schedule, now: later)
        guard case .disabled = last else {
            Issue.record("not disabled: \(last)")
            return
        }
        let disabled = try #require(try await store.webhook(id, of: project.rowID))
        let now = later.addingTimeInterval(60)
        #expect(try await queued(store, at: now).isEmpty)

        let enabled = try #require(try await store.enableWebhook(id, of: project.rowID, now: now))
        #expect(enabled.id == id)
        #expect(enabled.disabledAt == nil && enabled.disabledReason == nil && enabled.failingSince == nil)
        #expect(enabled == (try await store.webhook(id, of: project.rowID)))
        // Counters, last attempt and error stay as they were.
        #expect((enabled.backlog, enabled.sent, enabled.failed, enabled.dropped) == (2, 0, 0, 0))
        #expect(enabled.lastError == disabled.lastError && enabled.lastAttemptAt == disabled.lastAttemptAt)
        // Both events, the one due in an hour too, are claimed at once, signed with the same secret.
        let again = try await queued(store, at: now)
        #expect(Set(again.map(\.eventID)) == Set(events.map(\.eventID)))
        #expect(again.allSatisfy { $0.secret == hooks[0].secret && $0.attempts == 1 && $0.webhookID == id })
        // The 3 days are counted from the next failure: one now does not disable it again.
        let failed = try await store.recordWebhookAttempt(
            again[0], .failed("HTTP 503"), claimant: "w", schedule: schedule, now: now)
        #expect(failed == .retried(at: now.addingTimeInterval(3600)))
        let failing = try #require(try await store.webhook(id, of: project.rowID))
        #expect(failing.disabledAt == nil)
        #expect(failing.failingSince.map(EpochMilliseconds.milliseconds) == EpochMilliseconds.milliseconds(now))
        // Enabling an enabled webhook changes nothing, its queue's schedule neither.
        #expect(try await store.enableWebhook(id, of: project.rowID, now: now.addingTimeInterval(1)) == failing)
        try await store.releaseWebhookEvents(claimedBy: "w")
        #expect(try await queued(store, at: now.addingTimeInterval(2)).map(\.eventID) == [again[1].eventID])
        #expect(try await store.enableWebhook("wh_none", of: project.rowID, now: now) == nil)
    }

    @Test("A webhook's secret is whsec_ and 32 random bytes; a rotated one signs beside the new for 24 h")
    func secretsAndRotation() async throws {
        let (store, project, job, page, hooks) = try await claimedSend(1, hooks: [[.messageCompleted]])
        let secret = hooks[0].secret
        #expect(secret.hasPrefix("whsec_"))
        #expect(Data(base64Encoded: String(secret.dropFirst(6)))?.count == 32)
        #expect(hooks[0].webhook.id.hasPrefix("wh_"))
        let rotated = try #require(
            try await store.rotateWebhookSecret(hooks[0].webhook.id, of: project.rowID, now: Date()))
        #expect(rotated.secret != secret)
        _ = try await store.record(
            [outcome(page.attempts[0], .delivered)], of: job, page: page, claimant: "a", leaseUntil: Date(), now: Date()
        )
        let event = try #require(try await queued(store).first)
        #expect(event.secret == rotated.secret)
        #expect(event.previousSecret == secret)
        try await store.releaseWebhookEvents(claimedBy: "w")
        // A day later the old secret no longer signs.
        let dayLater = try #require(try await queued(store, at: Date().addingTimeInterval(24 * 3600 + 60)).first)
        #expect(dayLater.previousSecret == nil)
    }

    @Test("A project has at most 16 webhooks; another project sees none of them")
    func limitsAndProjects() async throws {
        let (registry, project) = try await makeRegistry()
        let (other, _) = try await registry.createProject(projectId: "other", senderId: "999")
        let store = try #require(registry.store as? any RegistryBackend)
        var ids: [String] = []
        for _ in 0..<16 {
            ids.append(
                try await store.createWebhook(
                    project: project.rowID, url: Self.url, events: [.deliveryFailed], limit: 16, now: Date()
                ).webhook.id)
        }
        await #expect(throws: RegistryError.tooManyWebhooks(limit: 16)) {
            _ = try await store.createWebhook(
                project: project.rowID, url: Self.url, events: [.deliveryFailed], limit: 16, now: Date())
        }
        #expect(try await store.webhooks(of: project.rowID).map(\.id) == ids)
        #expect(try await store.webhooks(of: other.rowID).isEmpty)
        #expect(try await store.webhook(ids[0], of: other.rowID) == nil)
        #expect(try await store.deleteWebhook(ids[0], of: other.rowID) == false)
        #expect(try await store.rotateWebhookSecret(ids[0], of: other.rowID, now: Date()) == nil)
        #expect(try await store.enableWebhook(ids[0], of: other.rowID, now: Date()) == nil)
        #expect(try await store.deleteWebhook(ids[0], of: project.rowID))
        #expect(try await store.webhooks(of: project.rowID).count == 15)
    }
}

/// The rules that need no store: the event batch's bound, URLs, addresses, signatures.
@Suite("Webhook rules")
struct WebhookRuleTests {
    @Test("A full backlog drops the webhook's new events and counts them")
    func backlogBound() {
        var batch = WebhookEventBatch()
        batch.messageID = "m"
        batch.failed("t1", error: "INVALID_ARGUMENT", gone: false)
        batch.failed("t2", error: "INVALID_ARGUMENT", gone: false)
        let targets = [
            WebhookEventBatch.Target(
                rowID: 1, events: WebhookEventType.mask(WebhookEventType.allCases),
                backlog: WebhookRules.backlogPerWebhook - 1),
            WebhookEventBatch.Target(rowID: 2, events: WebhookEventType.deliveryFailed.bit, backlog: 0),
        ]
        let (rows, dropped) = batch.rows(for: targets, projectID: "p", finished: false, counts: nil)
        #expect(rows.filter { $0.webhook == 1 }.count == 1)
        #expect(rows.filter { $0.webhook == 2 }.count == 2)
        #expect(dropped == [1: 1])
    }

    @Test("Only https, with a host, no credentials; http with private networks allowed")
    func urlShapes() throws {
        let strict = WebhookURLPolicy()
        #expect(
            try strict.target(of: "https://example.com/hooks?x=1")
                == .init(isHTTPS: true, host: "example.com", port: 443))
        #expect(
            try strict.target(of: "https://[2606:2800:220:1::1]:8443/")
                == .init(isHTTPS: true, host: "2606:2800:220:1::1", port: 8443))
        for bad in [
            "http://example.com/", "ftp://example.com/", "https:///x", "example.com", "https://u:p@example.com/",
            "https://example.com/#f", "",
        ] {
            #expect(throws: RegistryError.self, "\(bad)") { try strict.target(of: bad) }
        }
        let open = WebhookURLPolicy(allowPrivateNetworks: true)
        #expect(try open.target(of: "http://127.0.0.1:9000/h") == .init(isHTTPS: false, host: "127.0.0.1", port: 9000))
    }

    @Test(
        "No loopback, private, shared, link-local, metadata, unique-local or reserved address, in IPv4 or IPv6",
        arguments: [
            "127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1",
            "100.100.100.200", "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "::1", "::",
            "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2001:db8::1", "::127.0.0.1",
        ])
    func privateAddresses(_ text: String) throws {
        #expect(try #require(IPAddress(text)).isPublic == false)
    }

    @Test(
        "Public addresses pass",
        arguments: ["93.184.215.14", "8.8.8.8", "2606:2800:220:1::1", "::ffff:8.8.8.8", "172.32.0.1"])
    func publicAddresses(_ text: String) throws {
        #expect(try #require(IPAddress(text)).isPublic)
    }

    @Test("A name is resolved and every address checked: loopback refused, unless private networks are allowed")
    func resolvedAddresses() async throws {
        let strict = WebhookURLPolicy()
        for url in [
            "https://localhost/h", "https://127.0.0.1/h", "https://[::1]/h", "https://2130706433/h", "https://0x7f.1/h",
        ] {
            await #expect(throws: RegistryError.self, "\(url)") {
                _ = try await strict.addresses(of: try strict.target(of: url))
            }
        }
        #expect(try await strict.addresses(of: strict.target(of: "https://93.184.215.14/h")) == ["93.184.215.14"])
        let open = WebhookURLPolicy(allowPrivateNetworks: true)
        #expect(try await open.addresses(of: open.target(of: "http://127.0.0.1:9/h")) == ["127.0.0.1"])
    }

    @Test("Signatures are the Standard Webhooks' (the spec's own example); a rotation sends two")
    func signatures() {
        // From the reference libraries' tests (standard-webhooks, svix).
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        let signature = WebhookSignature.sign(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: #"{"test": 2432232314}"#, secret: secret
        )
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        let both = WebhookSignature.header(
            id: "msg_1", timestamp: 1, body: "{}",
            secrets: [secret, "whsec_" + Data("another key".utf8).base64EncodedString()])
        #expect(both.split(separator: " ").count == 2)
        #expect(both.hasPrefix(WebhookSignature.sign(id: "msg_1", timestamp: 1, body: "{}", secret: secret)! + " v1,"))
    }

    @Test("Event bodies are JSON with type, timestamp and data, whatever a token holds")
    func bodies() throws {
        var batch = WebhookEventBatch()
        batch.messageID = "m\"1"
        batch.now = 1_700_000_000_123
        batch.failed("a\"b\\c", error: "UNREGISTERED", gone: true)
        let (rows, _) = batch.rows(
            for: [.init(rowID: 1, events: WebhookEventType.mask(WebhookEventType.allCases), backlog: 0)],
            projectID: "p",
            finished: false, counts: nil)
        #expect(rows.count == 2)
        for row in rows {
            let body = try #require(JSONSerialization.jsonObject(with: Data(row.payload.utf8)) as? [String: Any])
            #expect(body["timestamp"] as? String == "2023-11-14T22:13:20.123Z")
            let data = try #require(body["data"] as? [String: Any])
            #expect(data["token"] as? String == "a\"b\\c")
            #expect(data["messageId"] as? String == "m\"1")
            #expect(row.payload.hasPrefix(#"{"type":"#))
        }
    }
}
