import Foundation
import Hummingbird
import Registry
import RegistryApp
import RegistrySQLite
import TestBackends
import Testing

@Suite("Instance ID API", .onEveryBackend)
struct InstanceIDAPITests {
    @Test("batchAdd: results in input order with INVALID_ARGUMENT, NOT_FOUND and TOO_MANY_TOPICS")
    func batchAddResults() async throws {
        var limits = Limits()
        limits.topicsPerToken = 1
        let registry = try await RegistryService(store: TestBackend.makeStore(), limits: limits)
        try await registry.startAudience()
        let (project, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        let fixture = Fixture(registry: registry, project: project, key: key)
        _ = try await registry.subscribe([token(3)], to: "other", in: project)
        _ = try await registry.registerToken(token(2), in: project)
        _ = try await registry.unregisterToken(token(2), in: project)
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/iid/v1:batchAdd",
                body:
                    #"{"to":"/topics/movies","registration_tokens":["\#(token(1))","bad token","\#(token(2))","\#(token(3))"]}"#
            )
            #expect(reply.status == .ok)
            #expect(
                reply.json == [
                    "results": [
                        [:], ["error": "INVALID_ARGUMENT"], ["error": "NOT_FOUND"], ["error": "TOO_MANY_TOPICS"],
                    ]
                ])
        }
    }

    @Test("batchRemove: a token never subscribed succeeds")
    func batchRemove() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/movies","registration_tokens":["\#(token(1))"]}"#)
            let reply = try await client.call(
                .post, "/iid/v1:batchRemove",
                body: #"{"to":"/topics/movies","registration_tokens":["\#(token(1))","\#(token(2))"]}"#)
            #expect(reply.json == ["results": [[:], [:]]])
            #expect(try await fixture.registry.store.topics(in: fixture.project, prefix: "", after: nil, limit: 10).items.isEmpty)
        }
    }

    @Test(arguments: [
        (#"{"to":"movies","registration_tokens":["a"]}"#, "Topic name format is invalid"),
        (#"{"to":"/topics/bad topic","registration_tokens":["a"]}"#, "Topic name format is invalid"),
        (#"{"to":"/topics/","registration_tokens":["a"]}"#, "Topic name format is invalid"),
        (#"{"registration_tokens":["a"]}"#, "Topic name format is invalid"),
        (#"{"to":"/topics/movies","registration_tokens":[]}"#, "MissingIIdToken"),
        (#"{"to":"/topics/movies"}"#, "MissingIIdToken"),
        (#"{"to":"/topics/movies","registration_tokens":"a"}"#, "registration_tokens must be an array of strings"),
        (#"{"to":"/topics/movies","#, "the request body is not valid JSON"),
    ])
    func requestErrors(body: String, error: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(.post, "/iid/v1:batchAdd", body: body)
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": .string(error)])
        }
    }

    @Test("More than 1000 tokens is a 400 and nothing is written")
    func tooManyTokens() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/t","registration_tokens":\#(jsonArray((0...1000).map(token)))}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": "too many registration tokens: at most 1000 per request"])
            #expect(try await fixture.registry.token(token(0), in: fixture.project) == nil)
            let ok = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/t","registration_tokens":\#(jsonArray((1...1000).map(token)))}"#)
            #expect(ok.json?["results"]?.array?.count == 1000)
        }
    }

    @Test("rel/topics subscribes one token; info lists its topics with addDate")
    func relAndInfo() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let encoded = token(1).replacingOccurrences(of: ":", with: "%3A")
            let subscribe = try await client.call(.post, "/iid/v1/\(encoded)/rel/topics/news")
            #expect(subscribe.status == .ok)
            #expect(subscribe.json == [:])
            let info = try await client.call(.get, "/iid/info/\(token(1))?details=true")
            #expect(info.status == .ok)
            let day = try #require(info.json?["rel"]?["topics"]?["news"]?["addDate"]?.string)
            #expect(day.wholeMatch(of: /\d{4}-\d{2}-\d{2}/) != nil)
            #expect(info.json?["authorizedEntity"] == "123456789012")
            let plain = try await client.call(.get, "/iid/info/\(token(1))")
            #expect(plain.json?["rel"] == nil)
        }
    }

    @Test("info: unknown token 404, malformed token 400")
    func infoErrors() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let unknown = try await client.call(.get, "/iid/info/\(token(9))?details=true")
            #expect(unknown.status == .notFound)
            #expect(unknown.json == ["error": "No information found about this instance id."])
            let malformed = try await client.call(.get, "/iid/info/bad%20token")
            #expect(malformed.status == .badRequest)
            #expect(malformed.json == ["error": "InvalidToken"])
            let badTopic = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/bad%2Ftopic")
            #expect(badTopic.json == ["error": "Topic name format is invalid"])
        }
    }

    @Test("Unregistered tokens are NOT_FOUND for IID calls")
    func unregistered() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/news")
            let deleted = try await client.call(.delete, "/api/tokens/\(token(1))")
            #expect(deleted.json?["state"] == "unregistered")
            let again = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/news")
            #expect(again.status == .notFound)
            #expect(again.json == ["error": "NOT_FOUND"])
            let info = try await client.call(.get, "/iid/info/\(token(1))")
            #expect(info.status == .notFound)
        }
    }
}
