import Foundation
import HTTPTypes
import Registry
import TestBackends
import Testing

/// What the console reads, as any client reads it: each message's delivery counts in the message
/// list (one query a page), what became of each message on one token, and the per-minute history
/// the store keeps (`GET /api/stats`).
@Suite(.onEveryBackend) struct ConsoleAPITests {
    @Test func theMessageListCarriesEachMessagesCountsAndATokensListingItsFate() async throws {
        try await RelayHarness.run { harness in
            let (alive, dead) = (token(1), token(2))
            try await harness.registerUpstream([alive])  // FCM never knew `dead`
            try await harness.subscribe([alive, dead], to: "news")
            let reply = try await harness.client.call(
                .post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let id = try #require(reply.json?["message_id"].flatMap { if case .number(let n) = $0 { n } else { nil } })
            let counts = try await harness.settled(String(Int64(id)))
            #expect(counts == DeliveryCounts(pending: 0, delivered: 1, failed: 1))
            // The list says what the message's own screen says, in the same shape.
            let listed = try #require(
                try await harness.client.call(.get, "/api/messages").json?["messages"]?.array?.first)
            let single = try await harness.client.call(.get, "/api/messages/\(Int64(id))").json
            #expect(listed["delivery"] == ["pending": 0, "delivered": 1, "failed": 1, "cancelled": 0])
            #expect(listed["delivery"] == single?["delivery"])
            #expect(listed["tokenDelivery"] == nil)
            // Each token's listing says what became of the message on it, with FCM's error.
            let reached = try await harness.client.call(.get, "/api/tokens/\(alive)/messages").json?["messages"]?.array
            #expect(reached?.first?["tokenDelivery"]?["state"] == "delivered")
            let refused = try await harness.client.call(.get, "/api/tokens/\(dead)/messages").json?["messages"]?.array
            #expect(refused?.first?["tokenDelivery"]?["state"] == "failed")
            #expect(refused?.first?["tokenDelivery"]?["error"] == "UNREGISTERED")
            // And the minute's history counts the message, both outcomes and the pruned token.
            let stats = try await harness.client.call(.get, "/api/stats?window=1h")
            #expect(stats.status == .ok)
            #expect(stats.json?["totals"] == ["accepted": 1, "delivered": 1, "failed": 1, "pruned": 1])
            let minutes = try #require(stats.json?["minutes"]?.array)
            #expect(!minutes.isEmpty && minutes.allSatisfy { $0["at"]?.string != nil })
        }
    }

    @Test func aProjectThatDoesNotRelayListsItsMessagesWithoutCounts() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/news","registration_tokens":["\#(token(1))"]}"#)
            #expect(try await client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#).status == .ok)
            let listed = try #require(try await client.call(.get, "/api/messages").json?["messages"]?.array?.first)
            #expect(listed["delivery"] == .null)
            let stats = try await client.call(.get, "/api/stats").json
            #expect(stats?["window"] == "24h")
            #expect(stats?["totals"]?["accepted"] == 1)
            #expect(stats?["totals"]?["delivered"] == 0)
        }
    }

    @Test(arguments: ["25h", "0m", "1441m", "h", "24", "1d", "-5m"])
    func aWindowOutsideOneMinuteToADayIsRefused(_ window: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(.get, "/api/stats?window=\(window)")
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["code"] == "invalid_argument")
        }
    }

    @Test func theHistoryIsTheStoresSoAnotherServerOnItReadsIt() async throws {
        // Two registries on one store stand for two servers, or one server before and after a restart.
        let store = try await TestBackend.makeStore()
        let first = try await RegistryService(store: store)
        try await first.startAudience()
        let (project, _) = try await first.createProject(projectId: "stats-app", senderId: "333000333000")
        _ = try await first.subscribe([token(1)], to: "news", in: project)
        _ = try await first.send(Message(target: .topic("news")), via: .legacy, in: project)
        _ = try await first.send(Message(target: .topic("news")), via: .legacy, in: project)
        let second = try await RegistryService(store: store)
        let minutes = try await second.minuteStats(in: project, window: .seconds(3600))
        #expect(minutes.reduce(0) { $0 + $1.accepted } == 2)
        #expect(minutes.allSatisfy { $0.minute % 60_000 == 0 })
    }

    @Test func tokensAreBrowsedByPrefixAPageAtATime() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let tokens = ["aa:1", "ab:1", "ab:2", "ab:3", "b:1"].map { $0 + String(repeating: "x", count: 20) }
            _ = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/t","registration_tokens":\#(jsonArray(tokens))}"#)
            _ = try await client.call(.delete, "/api/tokens/\(tokens[2])")
            let first = try await client.call(.get, "/api/tokens?prefix=ab&pageSize=2").json
            #expect(first?["tokens"]?.array?.compactMap { $0["token"]?.string } == Array(tokens[1...2]))
            #expect(first?["tokens"]?.array?.last?["state"] == "unregistered")
            let next = try #require(first?["nextPageToken"]?.string)
            let second = try await client.call(.get, "/api/tokens?prefix=ab&pageSize=2&pageToken=\(next)").json
            #expect(second?["tokens"]?.array?.compactMap { $0["token"]?.string } == [tokens[3]])
            #expect(second?["nextPageToken"] == nil)
            let all = try await client.call(.get, "/api/tokens").json?["tokens"]?.array
            #expect(all?.compactMap { $0["token"]?.string } == tokens)
            // A prefix no token can start with lists nothing; a page token not of this listing is refused.
            #expect(try await client.call(.get, "/api/tokens?prefix=%20").json?["tokens"] == [])
            #expect(try await client.call(.get, "/api/tokens?pageToken=bm90LWEtdG9rZW4").status == .badRequest)
        }
    }
}
