import Registry
import TestBackends
import Testing

@Suite("Topic subscriptions", .onEveryBackend)
struct TopicTests {
    @Test("batchAdd outcomes come in input order")
    func outcomesInOrder() async throws {
        var limits = Limits()
        limits.topicsPerToken = 2
        let (registry, project) = try await makeRegistry(limits: limits)
        _ = try await registry.subscribe([token(3)], to: "a", in: project)
        _ = try await registry.subscribe([token(3)], to: "b", in: project)
        _ = try await registry.registerToken(token(2), in: project)
        _ = try await registry.unregisterToken(token(2), in: project)
        let outcomes = try await registry.subscribe(
            [token(1), "bad token", token(2), token(3), token(1)], to: "c", in: project)
        #expect(outcomes == [.ok, .invalidArgument, .notFound, .tooManyTopics, .ok])
        let page = try #require(
            try await registry.store.topicSubscribers(named: "c", in: project, after: nil, limit: 10))
        #expect(page.0.subscriberCount == 1)
        #expect(page.1.items.map(\.name) == [token(1)])
    }

    @Test("Subscribing again is fine; a token at its topic limit can still be resubscribed to a topic it has")
    func idempotent() async throws {
        var limits = Limits()
        limits.topicsPerToken = 1
        let (registry, project) = try await makeRegistry(limits: limits)
        #expect(try await registry.subscribe([token(1)], to: "a", in: project) == [.ok])
        #expect(try await registry.subscribe([token(1)], to: "a", in: project) == [.ok])
        #expect(try await registry.subscribe([token(1)], to: "b", in: project) == [.tooManyTopics])
    }

    @Test("batchRemove of a token never subscribed succeeds; unregistered tokens are NOT_FOUND")
    func remove() async throws {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.subscribe([token(1)], to: "a", in: project)
        _ = try await registry.registerToken(token(3), in: project)
        _ = try await registry.unregisterToken(token(3), in: project)
        let outcomes = try await registry.unsubscribe(
            [token(1), token(2), token(3), "bad token"], from: "a", in: project)
        #expect(outcomes == [.ok, .ok, .notFound, .invalidArgument])
        #expect(try await registry.store.topics(in: project, prefix: "", after: nil, limit: 10).items.isEmpty)
    }

    @Test("Invalid topic names are refused before anything is written")
    func invalidTopic() async throws {
        let (registry, project) = try await makeRegistry()
        await #expect(throws: RegistryError.invalidTopicName) {
            try await registry.subscribe([token(1)], to: "bad/topic", in: project)
        }
        #expect(try await registry.store.token(token(1), in: project) == nil)
    }

    @Test("Single subscriptions: create, exists, get, list by page, delete")
    func single() async throws {
        let (registry, project) = try await makeRegistry()
        let created = try await registry.createSubscription(token: token(1), topic: "b", in: project)
        #expect(created.topic == "b")
        await #expect(throws: RegistryError.subscriptionExists) {
            try await registry.createSubscription(token: token(1), topic: "b", in: project)
        }
        _ = try await registry.createSubscription(token: token(1), topic: "a", in: project)
        _ = try await registry.createSubscription(token: token(1), topic: "c", in: project)
        let first = try #require(
            try await registry.subscriptions(ofToken: token(1), in: project, after: nil, pageSize: 2))
        #expect(first.items.map(\.topic) == ["a", "b"])
        let second = try #require(
            try await registry.subscriptions(ofToken: token(1), in: project, after: first.nextAfter, pageSize: 2))
        #expect(second.items.map(\.topic) == ["c"])
        #expect(second.nextAfter == nil)
        #expect(try await registry.subscription(token: token(1), topic: "b", in: project) != nil)
        #expect(try await registry.deleteSubscription(token: token(1), topic: "b", in: project))
        #expect(try await !registry.deleteSubscription(token: token(1), topic: "b", in: project))
        #expect(try await registry.subscription(token: token(1), topic: "b", in: project) == nil)
    }

    @Test("One project never sees another's topics or tokens")
    func isolation() async throws {
        let (registry, project) = try await makeRegistry()
        let (second, _) = try await registry.createProject(projectId: "second", senderId: "222")
        _ = try await registry.subscribe([token(1)], to: "a", in: project)
        #expect(try await registry.store.topics(in: second, prefix: "", after: nil, limit: 10).items.isEmpty)
        #expect(try await registry.token(token(1), in: second) == nil)
        #expect(try await registry.subscriptions(ofToken: token(1), in: second, after: nil, pageSize: nil) == nil)
    }
}

@Suite("Tokens", .onEveryBackend)
struct TokenTests {
    @Test("Unregistering leaves every group and topic at once, deleting groups it empties")
    func unregister() async throws {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.createGroup(named: "solo", tokens: [token(1)], in: project)
        _ = try await registry.createGroup(named: "pair", tokens: [token(1), token(2)], in: project)
        _ = try await registry.subscribe([token(1), token(2)], to: "a", in: project)
        _ = try await registry.subscribe([token(1)], to: "b", in: project)
        let info = try #require(try await registry.unregisterToken(token(1), in: project))
        #expect(info.state == .unregistered)
        #expect(try await registry.store.group(named: "solo", in: project) == nil)
        #expect(try await registry.store.group(named: "pair", in: project)?.memberCount == 1)
        #expect(try await registry.store.topics(in: project, prefix: "", after: nil, limit: 10).items.map(\.name) == ["a"])
        #expect(try await registry.store.groups(ofToken: token(1), in: project).isEmpty)
        #expect(try await registry.subscribe([token(1)], to: "a", in: project) == [.notFound])
        // Registered again, it works again.
        #expect(try await registry.registerToken(token(1), in: project).state == .registered)
        #expect(try await registry.subscribe([token(1)], to: "a", in: project) == [.ok])
    }

    @Test("Unknown tokens: nil, not an error")
    func unknown() async throws {
        let (registry, project) = try await makeRegistry()
        #expect(try await registry.unregisterToken(token(1), in: project) == nil)
        await #expect(throws: RegistryError.malformedToken) { try await registry.token("a b", in: project) }
    }
}
