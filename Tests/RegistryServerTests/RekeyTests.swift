import AudienceEngine
import Foundation
import HTTPTypes
import Registry
import RegistryApp
import TestBackends
import Testing

/// Moving a device from its registration token to its Firebase installation id.
@Suite("Re-keying", .onEveryBackend)
struct RekeyTests {
    static let fid = "cAbCdEfGhIjKlMnOpQrStU"

    @Test("A re-key moves topics and groups to the new id in one step, and the old one is unregistered")
    func rekey() async throws {
        let fixture = try await Fixture.make()
        let registry = fixture.registry
        _ = try await registry.subscribe([token(1), token(2)], to: "news", in: fixture.project)
        _ = try await registry.subscribe([token(1)], to: "sports", in: fixture.project)
        _ = try await registry.createGroup(named: "phone", tokens: [token(1), token(2)], in: fixture.project)
        try await fixture.test { client in
            let moved = try await client.call(
                .post, "/api/tokens/\(token(1)):rekey", body: #"{"to":"\#(Self.fid)"}"#)
            #expect(moved.status == .ok)
            #expect(
                moved.json == [
                    "from": .string(token(1)), "to": .string(Self.fid), "topics": ["news", "sports"],
                    "groups": ["phone"],
                ])
            // The old token is dead: it reaches no one and Instance ID calls say so.
            let old = try await client.call(.get, "/iid/info/\(token(1))")
            #expect(old.status == .notFound)
            let audience = try await client.call(
                .post, "/api/audiences:resolve", body: #"{"condition":"'news' in topics"}"#)
            #expect(audience.json?["tokens"] == .array([.string(token(2)), .string(Self.fid)]))
            let group = try await client.call(.get, "/api/groups/phone")
            #expect(group.json?["members"]?.array?.compactMap { $0["token"]?.string }.sorted() == [token(2), Self.fid].sorted())
        }
    }

    @Test("A new id that already exists keeps its own topics and groups too; limits hold, and a refusal changes nothing")
    func mergeAndLimits() async throws {
        var limits = Limits()
        limits.topicsPerToken = 2
        let registry = try await RegistryService(store: TestBackend.makeStore(), limits: limits)
        try await registry.startAudience()
        let (project, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        let fixture = Fixture(registry: registry, project: project, key: key)
        _ = try await registry.subscribe([token(1)], to: "a", in: project)
        _ = try await registry.subscribe([token(2)], to: "b", in: project)
        let merged = try await registry.rekey(token(1), to: token(2), in: project)
        #expect(merged.topics == ["a", "b"])
        _ = try await registry.subscribe([token(3)], to: "c", in: project)
        // token(2) holds a and b; taking token(3)'s c would make three.
        await #expect(throws: RegistryError.tooManyTopics(limit: 2)) {
            try await registry.rekey(token(3), to: token(2), in: project)
        }
        #expect(try await registry.token(token(3), in: project)?.state == .registered)
        #expect(try await registry.allSubscriptions(ofToken: token(2), in: project)?.map(\.topic) == ["a", "b"])
        #expect(registry.audience.snapshot(of: project.rowID).members(of: "c").count == 1)
        try await fixture.test { client in
            let same = try await client.call(.post, "/api/tokens/\(token(3)):rekey", body: #"{"to":"\#(token(3))"}"#)
            #expect(same.status == .badRequest)
            let unknown = try await client.call(.post, "/api/tokens/\(token(9)):rekey", body: #"{"to":"\#(Self.fid)"}"#)
            #expect(unknown.status == .notFound)
            let missing = try await client.call(.post, "/api/tokens/\(token(3)):rekey", body: "{}")
            #expect(missing.status == .badRequest)
        }
    }

    @Test("The batch form re-keys each pair on its own, with one result per pair, in order")
    func batch() async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.registry.subscribe([token(1), token(2)], to: "news", in: fixture.project)
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/api/tokens:rekey",
                body: #"{"pairs":[{"from":"\#(token(1))","to":"fid-1"},{"from":"\#(token(9))","to":"fid-9"},{"from":"\#(token(2))","to":"fid-2"}]}"#
            )
            #expect(reply.status == .ok)
            let results = try #require(reply.json?["results"]?.array)
            #expect(results.count == 3)
            #expect(results[0]["topics"] == ["news"])
            #expect(results[1]["error"]?["code"] == "not_found")
            #expect(results[2]["to"] == "fid-2")
            let audience = try await client.call(
                .post, "/api/audiences:resolve", body: #"{"condition":"'news' in topics"}"#)
            #expect(audience.json?["tokens"] == ["fid-1", "fid-2"])
        }
    }
}
