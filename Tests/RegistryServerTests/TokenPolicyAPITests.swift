import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

/// A project's token policy (`GET`/`PATCH /api/project`, `project tokens`) and the expiry sweep it
/// drives: tests move the policy, never the clock.
@Suite("Token policy: when tokens are stale, when they expire, and the sweep that unregisters them", .onEveryBackend)
struct TokenPolicyAPITests {
    static func daysAgo(_ days: Int) -> String {
        Date().addingTimeInterval(-Double(days) * 86_400).formatted(.iso8601)
    }

    @Test(
        "GET /api/project shows FCM's policy until PATCH changes it; keys left out keep their value, null turns expiry off"
    )
    func patchAndGet() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let standard = try await client.call(.get, "/api/project")
            #expect(
                standard.json?["tokenPolicy"]
                    == ["staleAfter": "2592000s", "expireAfter": .null, "sendToStale": true])

            let patched = try await client.call(
                .patch, "/api/project", body: #"{"tokenPolicy":{"expireAfter":"23328000s","sendToStale":false}}"#)
            #expect(patched.status == .ok)
            #expect(
                patched.json?["tokenPolicy"]
                    == ["staleAfter": "2592000s", "expireAfter": "23328000s", "sendToStale": false])
            #expect(patched.json?["projectId"] == "test-app")

            let stale = try await client.call(
                .patch, "/api/project", body: #"{"tokenPolicy":{"staleAfter":"604800s"}}"#)
            #expect(
                stale.json?["tokenPolicy"]
                    == ["staleAfter": "604800s", "expireAfter": "23328000s", "sendToStale": false])
            #expect((try await client.call(.get, "/api/project")).json?["tokenPolicy"] == stale.json?["tokenPolicy"])

            let off = try await client.call(.patch, "/api/project", body: #"{"tokenPolicy":{"expireAfter":null}}"#)
            #expect(off.json?["tokenPolicy"] == ["staleAfter": "604800s", "expireAfter": .null, "sendToStale": false])

            // Audited, with the policy as it became.
            let audit = try await client.call(.get, "/api/audit?action=tokenPolicy.changed")
            let entries = try #require(audit.json?["entries"]?.array)
            #expect(entries.count == 3)
            #expect(entries.first?["details"]?["expireAfter"] == "off")
        }
    }

    @Test(
        "A policy the server refuses is 400 invalid_argument naming the field, and nothing changes",
        arguments: [
            (#"{"tokenPolicy":{"staleAfter":"30d"}}"#, "tokenPolicy.staleAfter"),
            (#"{"tokenPolicy":{"staleAfter":"0s"}}"#, "tokenPolicy.staleAfter"),
            (#"{"tokenPolicy":{"staleAfter":"-5s"}}"#, "tokenPolicy.staleAfter"),
            (#"{"tokenPolicy":{"staleAfter":"1.5s"}}"#, "tokenPolicy.staleAfter"),
            (#"{"tokenPolicy":{"staleAfter":"999999999999s"}}"#, "tokenPolicy.staleAfter"),
            (#"{"tokenPolicy":{"staleAfter":2592000}}"#, "tokenPolicy.staleAfter"),
            (#"{"tokenPolicy":{"expireAfter":"60s"}}"#, "tokenPolicy.expireAfter"),
            (#"{"tokenPolicy":{"expireAfter":"86400s"}}"#, "tokenPolicy.expireAfter"),
            (#"{"tokenPolicy":{"staleAfter":"31536000s","expireAfter":"23328000s"}}"#, "tokenPolicy.expireAfter"),
            (#"{"tokenPolicy":{"expireAfter":"23328000s","sendToStale":"no"}}"#, "tokenPolicy.sendToStale"),
            (#"{"tokenPolicy":{"staleAfter":"604800s","colour":"red"}}"#, "tokenPolicy"),
            (#"{"tokenPolicy":{}}"#, "tokenPolicy"), (#"{"tokenPolicy":"270d"}"#, "tokenPolicy"),
            (#"{"projectId":"other"}"#, "tokenPolicy"),
        ])
    func refused(body: String, field: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(.patch, "/api/project", body: #"{"tokenPolicy":{"sendToStale":false}}"#)
            let before = try await client.call(.get, "/api/project")
            let refused = try await client.call(.patch, "/api/project", body: body)
            #expect(refused.status == .badRequest)
            #expect(refused.json?["error"]?["code"] == "invalid_argument")
            // The message names the field first, as every native refusal does.
            #expect(refused.json?["error"]?["message"]?.string?.hasPrefix(field) == true)
            #expect((try await client.call(.get, "/api/project")).json?["tokenPolicy"] == before.json?["tokenPolicy"])
        }
    }

    @Test("PATCH /api/project needs the admin scope")
    func adminOnly() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let created = try await client.call(
                .post, "/api/keys", body: #"{"name":"ops","scopes":["read","subscribe"]}"#)
            let key = try #require(created.json?["key"]?.string)
            let refused = try await client.call(
                .patch, "/api/project", body: #"{"tokenPolicy":{"sendToStale":false}}"#, auth: .some("key=\(key)"))
            #expect(refused.status == .forbidden)
            #expect((try await client.call(.get, "/api/project")).json?["tokenPolicy"]?["sendToStale"] == true)
        }
    }

    @Test("fresh in GET /api/tokens/{token} and the listing follows the project's staleAfter")
    func freshFollowsPolicy() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(.put, "/api/tokens/\(token(1))", body: #"{"lastSeenAt":"\#(Self.daysAgo(10))"}"#)
            #expect((try await client.call(.get, "/api/tokens/\(token(1))")).json?["fresh"] == true)
            _ = try await client.call(.patch, "/api/project", body: #"{"tokenPolicy":{"staleAfter":"604800s"}}"#)
            #expect((try await client.call(.get, "/api/tokens/\(token(1))")).json?["fresh"] == false)
            let listed = try await client.call(.get, "/api/tokens")
            #expect(listed.json?["tokens"]?.array?.first?["fresh"] == false)
            _ = try await client.call(.patch, "/api/project", body: #"{"tokenPolicy":{"staleAfter":"1209600s"}}"#)
            #expect((try await client.call(.get, "/api/tokens/\(token(1))")).json?["fresh"] == true)
        }
    }

    @Test(
        "A token last seen 300 days ago is unregistered by the sweep once expireAfter is 270 days: it leaves its topics and groups, an emptied group is deleted, it counts as pruned, and webhooks hear token.unregistered with reason EXPIRED"
    )
    func expirySweep() async throws {
        let fixture = try await Fixture.make()
        let store = try #require(fixture.registry.store as? any RegistryBackend)
        let sweep = TokenExpirySweep(registry: fixture.registry)
        try await fixture.test { client in
            #expect(try await client.call(.post, "/api/webhooks", body: WebhookAPITests.create).status == .created)
            // The old token is in a topic with a fresh one, and alone in a group.
            _ = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/news","registration_tokens":["\#(token(1))","\#(token(2))"]}"#)
            let key = try await client.createGroup("old-phone", [token(1)])
            _ = try await client.call(.put, "/api/tokens/\(token(1))", body: #"{"lastSeenAt":"\#(Self.daysAgo(300))"}"#)
            _ = try await client.call(.put, "/api/tokens/\(token(3))", body: #"{"lastSeenAt":"\#(Self.daysAgo(200))"}"#)

            // Without expiry, no round runs and nothing leaves.
            #expect(try await sweep.runDueRounds().isEmpty)
            #expect((try await client.call(.get, "/api/tokens/\(token(1))")).json?["state"] == "registered")

            let patched = try await client.call(
                .patch, "/api/project", body: #"{"tokenPolicy":{"expireAfter":"23328000s"}}"#)
            #expect(patched.status == .ok)
            let rounds = try await sweep.runDueRounds()
            #expect(rounds == [TokenExpirySweep.Round(project: "test-app", expired: 1)])

            let gone = try await client.call(.get, "/api/tokens/\(token(1))")
            #expect(gone.json?["state"] == "unregistered")
            #expect(gone.json?["topics"] == [])
            #expect(gone.json?["groups"] == [])
            #expect((try await client.call(.get, "/api/tokens/\(token(3))")).json?["state"] == "registered")
            let topic = try await client.call(.get, "/api/topics/news")
            #expect(topic.json?["subscriberCount"] == 1)
            #expect(
                (try await client.call(.get, "/fcm/notification?notification_key_name=old-phone")).status != .ok)
            _ = key
            #expect((try await client.call(.get, "/api/groups/old-phone")).status == .notFound)
            #expect((try await client.call(.get, "/api/project")).json?["registeredTokens"] == 2)

            let stats = try await client.call(.get, "/api/stats?window=1h")
            #expect(stats.json?["totals"]?["pruned"] == 1)
            let audit = try await client.call(.get, "/api/audit?action=tokens.expired")
            #expect(audit.json?["entries"]?.array?.first?["details"] == ["count": "1"])

            let now = Date()
            let events = try await store.claimWebhookEvents(
                "w", leaseUntil: now.addingTimeInterval(60), now: now, limit: 10)
            #expect(events.count == 1)
            let payload = try #require(events.first?.payload)
            let body = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
            #expect(body["type"] as? String == "token.unregistered")
            let data = try #require(body["data"] as? [String: Any])
            #expect(data["token"] as? String == token(1))
            #expect(data["reason"] as? String == "EXPIRED")
            #expect(data["projectId"] as? String == "test-app")

            // The round is claimed: another right after finds nothing to do, even with more expired.
            _ = try await client.call(.put, "/api/tokens/\(token(4))", body: #"{"lastSeenAt":"\#(Self.daysAgo(280))"}"#)
            #expect(try await sweep.runDueRounds().isEmpty)
            #expect((try await client.call(.get, "/api/tokens/\(token(4))")).json?["state"] == "registered")
        }
    }

    @Test(
        "A round a crash cut short keeps its hour claimed, and a server's first look after it starts finishes it: only a claim renewed in the last 15 seconds (a round running elsewhere) holds it back"
    )
    func startUpFinishesAnInterruptedRound() async throws {
        let fixture = try await Fixture.make()
        let sweep = TokenExpirySweep(registry: fixture.registry)
        try await fixture.test { client in
            _ = try await client.call(.put, "/api/tokens/\(token(1))", body: #"{"lastSeenAt":"\#(Self.daysAgo(300))"}"#)
            _ = try await client.call(.patch, "/api/project", body: #"{"tokenPolicy":{"expireAfter":"23328000s"}}"#)
            // A server claimed the round ten minutes ago and died before sweeping.
            let now = Date()
            #expect(
                try await fixture.registry.store.claimTokenSweep(
                    of: fixture.project, at: now.addingTimeInterval(-600),
                    unlessClaimedSince: now.addingTimeInterval(-3600)))
            #expect(try await sweep.runDueRounds(now: now).isEmpty)
            #expect((try await client.call(.get, "/api/tokens/\(token(1))")).json?["state"] == "registered")
            let started = try await sweep.runDueRounds(now: now, claimedWithin: TokenExpirySweep.startUpWindow)
            #expect(started == [TokenExpirySweep.Round(project: "test-app", expired: 1)])
            #expect((try await client.call(.get, "/api/tokens/\(token(1))")).json?["state"] == "unregistered")
            // A second server starting in the same minute finds the round claimed.
            #expect(try await sweep.runDueRounds(now: now, claimedWithin: TokenExpirySweep.startUpWindow).isEmpty)
        }
    }

    @Test(
        "GET /api/tokens:freshness counts registered tokens fresh, stale, expiring within 7 days and by month last seen"
    )
    func freshness() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let empty = try await client.call(.get, "/api/tokens:freshness")
            #expect(empty.status == .ok)
            #expect(empty.json?["registered"] == 0)
            #expect(empty.json?["byMonth"]?.array?.count == 13)
            _ = try await client.call(.put, "/api/tokens/\(token(1))")
            for (n, days) in [(2, 10), (3, 45), (4, 200), (5, 400), (6, 500)] {
                _ = try await client.call(
                    .put, "/api/tokens/\(token(n))", body: #"{"lastSeenAt":"\#(Self.daysAgo(days))"}"#)
            }
            _ = try await client.call(.delete, "/api/tokens/\(token(6))")
            let counted = try await client.call(.get, "/api/tokens:freshness")
            #expect(counted.json?["registered"] == 5)
            #expect(counted.json?["fresh"] == 2)
            #expect(counted.json?["stale"] == 3)
            #expect(counted.json?["expiring7d"] == 0)
            #expect(counted.json?["byMonth"] == [2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1])
            _ = try await client.call(
                .patch, "/api/project", body: #"{"tokenPolicy":{"staleAfter":"604800s","expireAfter":"17712000s"}}"#)
            let moved = try await client.call(.get, "/api/tokens:freshness")
            #expect(moved.json?["fresh"] == 1)
            #expect(moved.json?["stale"] == 4)
            // 205 days: the 200-day-old token expires within a week, the 400-day-old one at the next round.
            #expect(moved.json?["expiring7d"] == 2)
        }
    }

    @Test("Two servers on one database: the one that claims the round sweeps, the other does not")
    func oneServerSweeps() async throws {
        let store = try await TestBackend.makeStore()
        let first = try await RegistryService(store: store)
        try await first.startAudience()
        let (project, _) = try await first.createProject(projectId: "test-app", senderId: "123456789012")
        let second = try await RegistryService(store: store)
        try await second.startAudience()
        var old = TokenAttributeChange()
        old.lastSeenAt = Date().addingTimeInterval(-300 * 86_400)
        for n in 1...3 { _ = try await first.registerToken(token(n), change: old, in: project) }
        try await first.setTokenPolicy(TokenPolicyChange(expireAfter: .some(.seconds(270 * 86_400))), for: project)
        // Small batches: a round is several transactions.
        let rounds = try await withThrowingTaskGroup(of: [TokenExpirySweep.Round].self) { group in
            for registry in [first, second] {
                group.addTask { try await TokenExpirySweep(registry: registry, batchSize: 2).runDueRounds() }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(rounds == [TokenExpirySweep.Round(project: "test-app", expired: 3)])
        #expect(try await second.token(token(2), in: project)?.state == .unregistered)
        // A policy change clears the claim: the next tick runs a round at once.
        _ = try await second.registerToken(token(5), change: old, in: project)
        #expect(try await second.runSweep().isEmpty)
        try await second.setTokenPolicy(TokenPolicyChange(sendToStale: false), for: project)
        #expect(try await second.runSweep() == [TokenExpirySweep.Round(project: "test-app", expired: 1)])
        // A policy read (and cached) is replaced at once when this server changes it.
        #expect(try await second.tokenPolicy(of: project).staleAfter == .seconds(30 * 86_400))
        try await second.setTokenPolicy(TokenPolicyChange(staleAfter: .seconds(7 * 86_400)), for: project)
        #expect(try await second.tokenPolicy(of: project).staleAfter == .seconds(7 * 86_400))
    }
}

extension RegistryService {
    fileprivate func runSweep() async throws -> [TokenExpirySweep.Round] {
        try await TokenExpirySweep(registry: self).runDueRounds()
    }
}

/// `fcm-registry project tokens`, run as a user runs it.
@Suite("project tokens", .enabled(if: ServeProcess.available), .timeLimit(.minutes(2)))
struct TokenPolicyCommandTests {
    @Test("project tokens shows the policy, changes what its options name, and refuses a bad value changing nothing")
    func roundTrip() async throws {
        let folder = try CommandLineTests.Folder()
        try await folder.createProject()
        let shown = try await folder.run(["project", "tokens", "--project-id", "p"])
        #expect(shown.status == 0)
        let standard = try CommandLineTests.json(shown.stdout)["tokenPolicy"] as? [String: Any]
        #expect(standard?["staleAfter"] as? String == "2592000s")
        #expect(standard?["expireAfter"] is NSNull)
        #expect(standard?["sendToStale"] as? Bool == true)

        let set = try await folder.run([
            "project", "tokens", "--project-id", "p", "--stale-after", "30d", "--expire-after", "270d",
            "--send-to-stale", "false",
        ])
        #expect(set.status == 0, "\(set.stderr)")
        let changed = try CommandLineTests.json(set.stdout)["tokenPolicy"] as? [String: Any]
        #expect(changed?["expireAfter"] as? String == "23328000s")
        #expect(changed?["sendToStale"] as? Bool == false)

        for (arguments, error) in [
            (["--expire-after", "10d"], "Error: tokenPolicy.expireAfter must be longer than staleAfter"),
            (
                ["--stale-after", "30 days"],
                "Error: --stale-after is a whole number and a unit (s, m, h or d), such as 30d"
            ),
            (["--send-to-stale", "maybe"], "Error: --send-to-stale is true or false"),
        ] {
            let refused = try await folder.run(["project", "tokens", "--project-id", "p"] + arguments)
            #expect(refused.status != 0)
            #expect(refused.stderr.contains(error), "\(refused.stderr)")
        }
        let off = try await folder.run(["project", "tokens", "--project-id", "p", "--expire-after", "off"])
        let after = try CommandLineTests.json(off.stdout)["tokenPolicy"] as? [String: Any]
        #expect(after?["expireAfter"] is NSNull)
        #expect(after?["staleAfter"] as? String == "2592000s")
        #expect(after?["sendToStale"] as? Bool == false)
    }
}
