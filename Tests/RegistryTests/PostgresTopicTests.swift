import AudienceEngine
import Foundation
import PostgresNIO
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: topics, across concurrent writers", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresTopicTests {
    func token(_ n: Int) -> String { "pg\(n):APA91b" + String(repeating: "t", count: 40) }

    @Test("batchAdd registers, subscribes, holds the topic limit and records the feed")
    func subscribe() async throws {
        try await TestPostgres.withProject { store, project in
            let first = try await store.subscribe([token(1), token(2)], to: "news", topicLimit: 2, in: project)
            #expect(first.value == [.ok, .ok])
            let today = SeenDay.of(secondsSince1970: Date().timeIntervalSince1970)
            #expect(first.changes.map(\.change) == [
                .registered(project: project.rowID, tokens: [1, 2]),
                .seen(project: project.rowID, tokens: [1, 2], day: today),
                .subscribed(project: project.rowID, topic: "news", tokens: [1, 2]),
            ])
            _ = try await store.subscribe([token(1)], to: "sports", topicLimit: 2, in: project)
            let limited = try await store.subscribe([token(1), token(2), token(2)], to: "weather", topicLimit: 2, in: project)
            #expect(limited.value == [.tooManyTopics, .ok, .ok])
            #expect(try await store.subscription(token: token(2), topic: "weather", in: project) != nil)
            let removed = try await store.unsubscribe([token(2), token(9)], from: "weather", in: project)
            #expect(removed.value == [.ok, .ok])
            // The topic went with its last subscriber.
            #expect(try await store.topicCreationTimes(["news", "weather"], in: project).keys.sorted() == ["news"])
        }
    }

    @Test("One subscription: conflicts, limits, and deleting the last one removes the topic")
    func single() async throws {
        try await TestPostgres.withProject { store, project in
            _ = try await store.createSubscription(token: token(1), topic: "a", topicLimit: 1, in: project)
            await #expect(throws: RegistryError.subscriptionExists) {
                try await store.createSubscription(token: token(1), topic: "a", topicLimit: 1, in: project)
            }
            await #expect(throws: RegistryError.tooManyTopics(limit: 1)) {
                try await store.createSubscription(token: token(1), topic: "b", topicLimit: 1, in: project)
            }
            // The failed request left nothing: no topic b.
            #expect(try await store.topicCreationTimes(["b"], in: project).isEmpty)
            #expect(try await store.deleteSubscription(token: token(1), topic: "a", in: project).value)
            #expect(try await !store.deleteSubscription(token: token(1), topic: "a", in: project).value)
            #expect(try await store.topicCreationTimes(["a"], in: project).isEmpty)
        }
    }

    @Test("Twenty writers at once: one token's topic limit holds, and batches in opposite orders never deadlock")
    func concurrent() async throws {
        try await TestPostgres.withProject { store, project in
            let created = try await withThrowingTaskGroup(of: Bool.self) { group in
                for n in 0..<20 {
                    group.addTask {
                        do {
                            _ = try await store.createSubscription(token: token(1), topic: "t\(n)", topicLimit: 5, in: project)
                            return true
                        } catch RegistryError.tooManyTopics {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(created == 5)
            let tokens = (10..<60).map(token)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<8 {
                    let batch = n.isMultiple(of: 2) ? tokens : tokens.reversed()
                    group.addTask {
                        _ = try await store.subscribe(batch, to: "shared", topicLimit: 100, in: project)
                        _ = try await store.unsubscribe(batch, from: "shared", in: project)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.topicCreationTimes(["shared"], in: project).isEmpty)
        }
    }
}

@Suite("PostgreSQL: a token's topics and the listings", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresTopicListingTests {
    func token(_ n: Int) -> String { "pl\(n):APA91b" + String(repeating: "l", count: 40) }

    @Test("setTopics makes exactly these the token's topics; two requests swapping topics never deadlock")
    func setTopics() async throws {
        try await TestPostgres.withProject { store, project in
            _ = try await store.setTopics(["a", "b"], ofToken: token(1), topicLimit: 5, in: project)
            let changed = try await store.setTopics(["b", "c"], ofToken: token(1), topicLimit: 5, in: project)
            #expect(changed.value == TopicChanges(added: ["c"], removed: ["a"]))
            #expect(try await store.subscriptions(ofToken: token(1), in: project, after: nil, limit: 10)?.items.map(\.topic) == ["b", "c"])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<10 {
                    group.addTask {
                        let topics = n.isMultiple(of: 2) ? ["x", "y"] : ["y", "z"]
                        for round in 0..<5 {
                            _ = try await store.setTopics(round.isMultiple(of: 2) ? topics : ["w"], ofToken: token(10 + n), topicLimit: 5, in: project)
                        }
                    }
                }
                try await group.waitForAll()
            }
            // Every token ends on its last set, and no topic is left without subscribers.
            let all = try await store.topics(in: project, prefix: "", after: nil, limit: 100).items
            #expect(all.map(\.name) == ["b", "c", "x", "y", "z"])
            #expect(all.allSatisfy { $0.subscriberCount > 0 })
        }
    }

    @Test("Topics by prefix and page; a topic's subscribers in token order")
    func listings() async throws {
        try await TestPostgres.withProject { store, project in
            for topic in ["news", "news-eu", "news-us", "newt", "sport"] {
                _ = try await store.subscribe([token(1), token(2), token(3)], to: topic, topicLimit: 10, in: project)
            }
            let first = try await store.topics(in: project, prefix: "news", after: nil, limit: 2)
            #expect(first.items.map(\.name) == ["news", "news-eu"])
            let second = try await store.topics(in: project, prefix: "news", after: first.nextAfter, limit: 2)
            #expect(second.items.map(\.name) == ["news-us"])
            #expect(second.nextAfter == nil)
            let (summary, page) = try #require(try await store.topicSubscribers(named: "sport", in: project, after: nil, limit: 2))
            #expect(summary.subscriberCount == 3)
            #expect(page.items.map(\.name) == [token(1), token(2)])
            let rest = try #require(try await store.topicSubscribers(named: "sport", in: project, after: page.nextAfter, limit: 2))
            #expect(rest.1.items.map(\.name) == [token(3)])
            #expect(try await store.topicSubscribers(named: "none", in: project, after: nil, limit: 2) == nil)
        }
    }
}

extension TestPostgres {
    /// A migrated store in a schema of its own, with one project.
    static func withProject(_ body: (PostgresStore, Project) async throws -> Void) async throws {
        try await withStore { store in
            _ = try await store.migrate()
            let project = try await store.createProject(projectId: "pg-app", senderId: "111111111111", keyHash: [1, 2, 3])
            try await body(store, project)
        }
    }
}
