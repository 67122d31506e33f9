@testable import AudienceEngine
import Conditions
import Foundation
@testable import Registry
import RegistrySQLite
import TestBackends
import Testing

@Suite("Audiences", .onEveryBackend)
struct AudienceTests {
    /// A small random registry built through the registry's own operations, and what it holds.
    struct World {
        var registry: RegistryService
        var project: Project
        /// Topics of each registered token; tokens with no topics are in it with an empty set.
        var topicsByToken: [String: Set<String>]
    }

    static let topics = ["a", "b", "c", "d", "e"]

    static func world(seed: UInt64) async throws -> World {
        var random = SplitMix64(seed: seed)
        let (registry, project) = try await makeRegistry()
        var topicsByToken: [String: Set<String>] = [:]
        for n in 0..<40 {
            let value = token(n)
            _ = try await registry.registerToken(value, in: project)
            var mine = Set<String>()
            for topic in topics where random.next() % 3 == 0 { mine.insert(topic) }
            for topic in mine { _ = try await registry.subscribe([value], to: topic, in: project) }
            topicsByToken[value] = mine
            if random.next() % 8 == 0 {
                _ = try await registry.unregisterToken(value, in: project)
                topicsByToken[value] = nil
            }
        }
        return World(registry: registry, project: project, topicsByToken: topicsByToken)
    }

    static func condition(using random: inout SplitMix64, depth: Int) -> String {
        if depth == 0 || random.next() % 3 == 0 { return "'\(topics[Int(random.next() % 5)])' in topics" }
        switch random.next() % 3 {
        case 0: return "!(" + condition(using: &random, depth: depth - 1) + ")"
        case 1:
            return "(" + condition(using: &random, depth: depth - 1) + " && "
                + condition(using: &random, depth: depth - 1) + ")"
        default:
            return "(" + condition(using: &random, depth: depth - 1) + " || "
                + condition(using: &random, depth: depth - 1) + ")"
        }
    }

    /// Every token of an audience, following pages of `pageSize`.
    static func all(_ target: AudienceTarget, in world: World, pageSize: Int) async throws -> (
        count: Int, tokens: [String]
    ) {
        var after: UInt32?
        var tokens: [String] = []
        var count = 0
        repeat {
            let page = try await world.registry.resolve(
                target, in: world.project, after: after, pageSize: pageSize, countOnly: false)
            count = page.count
            tokens += page.tokens ?? []
            after = page.nextAfter
        } while after != nil
        return (count, tokens)
    }

    @Test(
        "Resolution equals brute-force evaluation on random registries and conditions, including ! and tokens with no topics"
    )
    func matchesBruteForce() async throws {
        for seed in UInt64(1)...12 {
            let world = try await Self.world(seed: seed)
            var random = SplitMix64(seed: seed &* 7919)
            for _ in 0..<15 {
                let source = Self.condition(using: &random, depth: 3)
                let parsed = try Condition(parsing: source, dialect: .extended)
                let expected = Set(world.topicsByToken.filter { parsed.matches(subscribedTo: $0.value) }.keys)
                let (count, tokens) = try await Self.all(.condition(source, .extended), in: world, pageSize: 7)
                #expect(count == expected.count, "\(source)")
                #expect(Set(tokens) == expected, "\(source)")
                #expect(tokens.count == Set(tokens).count, "a token listed twice for \(source)")
            }
        }
    }

    /// Sparse: topic "a" is large with array containers; dense: with bitmap containers; wide: over
    /// enough chunks that counts and sets are computed in two parts at once.
    @Test(
        "Counts and chunk-by-chunk pages equal brute force when ids span many chunks, small and large topics alike",
        arguments: [(12_000, 330_000), (60_000, 200_000), (20_000, 4_500_000)])
    func chunkedEvaluation(ids: Int, range: UInt64) throws {
        for seed in UInt64(1)...4 {
            var random = SplitMix64(seed: seed)
            var snapshot = AudienceIndex.Snapshot()
            var topicsByID: [UInt32: Set<String>] = [:]
            for _ in 0..<ids {
                let id = UInt32(random.next() % range)
                var mine = Set<String>()
                if random.next() % 2 == 0 { mine.insert("a") }
                for topic in Self.topics.dropFirst() where random.next() % 9 == 0 { mine.insert(topic) }
                topicsByID[id] = mine
            }
            let registered = topicsByID.keys.sorted()
            snapshot.registered = RoaringBitmap(sortedIDs: registered)
            for topic in Self.topics {
                snapshot.topics[topic] = TopicMembers(sortedIDs: registered.filter { topicsByID[$0]!.contains(topic) })
            }
            #expect(snapshot.topics["a"].map { if case .large = $0 { true } else { false } } == true)
            for _ in 0..<20 {
                let source = Self.condition(using: &random, depth: 3)
                let expression = try Condition(parsing: source, dialect: .extended).expression
                let expected = registered.filter { expression.matches(subscribedTo: topicsByID[$0]!) }
                #expect(snapshot.count(expression) == expected.count, "\(source)")
                #expect(Array(snapshot.evaluate(expression).ids) == expected, "\(source)")
                var paged: [UInt32] = []
                var after: UInt32?
                while true {
                    let page = snapshot.ids(of: expression, after: after, limit: 997)
                    paged += page
                    guard page.count == 997, let last = page.last else { break }
                    after = last
                }
                #expect(paged == expected, "\(source)")
            }
        }
    }

    @Test("Topic, token, group and notification-key targets; counts with countOnly; per-topic counts")
    func otherTargets() async throws {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.subscribe((0..<5).map(token), to: "news", in: project)
        let key = try await registry.createGroup(named: "g", tokens: [token(1), token(9)], in: project)
        let topic = try await registry.resolve(.topic("news"), in: project, after: nil, pageSize: 2, countOnly: false)
        #expect(topic.count == 5)
        #expect(topic.tokens == [token(0), token(1)])
        #expect(topic.nextAfter != nil)
        let group = try await registry.resolve(.group("g"), in: project, after: nil, pageSize: nil, countOnly: false)
        #expect(Set(group.tokens ?? []) == [token(1), token(9)])
        let byKey = try await registry.resolve(
            .notificationKey(key), in: project, after: nil, pageSize: nil, countOnly: true)
        #expect(byKey.count == 2 && byKey.tokens == nil)
        let one = try await registry.resolve(.token(token(3)), in: project, after: nil, pageSize: nil, countOnly: false)
        #expect(one.tokens == [token(3)])
        let none = try await registry.resolve(
            .token(token(77)), in: project, after: nil, pageSize: nil, countOnly: false)
        #expect(none.count == 0)
        let condition = try await registry.resolve(
            .condition("'news' in topics && !('sports' in topics)", .extended), in: project, after: nil, pageSize: nil,
            countOnly: true)
        #expect(condition.count == 5)
        #expect(condition.topicCounts == ["news": 5, "sports": 0])
        await #expect(throws: RegistryError.groupNotFound) {
            try await registry.resolve(.group("nope"), in: project, after: nil, pageSize: nil, countOnly: true)
        }
    }

    @Test("The index loaded from the database equals the one kept current by writes")
    func loadedIndexMatches() async throws {
        let world = try await Self.world(seed: 99)
        let reopened = try await RegistryService(store: TestBackend.reopen(try #require(world.registry.store as? any RegistryBackend)))
        try await reopened.startAudience()
        let live = world.registry.audience.snapshot(of: world.project.rowID)
        let loaded = reopened.audience.snapshot(of: world.project.rowID)
        for topic in Self.topics {
            #expect(live.members(of: topic) == loaded.members(of: topic), "\(topic)")
        }
        #expect(live.registered == loaded.registered)
    }
}

@Suite("Topic members")
struct TopicMembersTests {
    @Test("Small topics are arrays, large ones bitmaps, and the switch keeps every member, both ways")
    func representation() {
        var random = SplitMix64(seed: 3)
        var expected = Set<UInt32>()
        var members = TopicMembers.small([])
        // Grow past the limit in batches, then shrink below the lower one.
        for _ in 0..<12 {
            let batch = (0..<500).map { _ in UInt32(random.next() % 2_000_000) }
            members.insert(contentsOf: batch)
            expected.formUnion(batch)
            #expect(members.count == expected.count)
        }
        guard case .large = members else {
            Issue.record("a topic of \(members.count) members should be a bitmap")
            return
        }
        let leaving = Array(expected).shuffled(using: &random).prefix(expected.count - 1000)
        members.remove(contentsOf: Array(leaving))
        expected.subtract(leaving)
        guard case .small(let ids) = members else {
            Issue.record("a topic of \(members.count) members should be an array")
            return
        }
        #expect(ids == expected.sorted())
        #expect(members.bitmap == RoaringBitmap(expected))
        #expect(members.ids(after: ids[9], limit: 5) == Array(ids[10..<15]))
        #expect(TopicMembers.small(ids) == TopicMembers.large(RoaringBitmap(expected)))
    }
}
