@testable import AudienceEngine
import Conditions
import Foundation
@testable import Registry
import TestBackends
import Testing

@Suite("Audience index: token attributes as bitmaps, and a where counted with them")
struct AttributeIndexTests {
    static let platforms = ["android", "ios", "web"]
    static let locales = ["fr", "fr-ca", "fr-fr", "frr", "en-gb", "de"]
    static let zones = ["Europe/Paris", "America/Toronto", "Asia/Tokyo"]
    static let versions = ["4.9", "5.0", "5.0.1", "5.12.0", "5.99", "6.0"]

    /// Tokens spread over 70 chunks (so that counts split over two threads), each with random
    /// attributes, some missing, and random topics.
    struct World {
        var index = AudienceIndex()
        var attributes: [UInt32: IndexedAttributes] = [:]
        var topics: [String: Set<UInt32>] = [:]
        var registered: Set<UInt32> = []

        init(seed: UInt64) {
            var random = SplitMix64(seed: seed)
            var tokens: [UInt32] = []
            for chunk in 0..<70 {
                for _ in 0..<(20 + Int(random.next() % 40)) {
                    tokens.append(UInt32(chunk) << 16 | UInt32(random.next() % 65_536))
                }
            }
            tokens = Array(Set(tokens)).sorted()
            var entries: [AudienceChange] = []
            entries.append(.registered(project: 1, tokens: tokens))
            var values: [IndexedAttributes] = []
            for token in tokens {
                func pick(_ choices: [String]) -> String? {
                    let n = Int(random.next() % UInt64(choices.count + 1))
                    return n == choices.count ? nil : choices[n]
                }
                let value = IndexedAttributes(
                    platform: pick(AttributeIndexTests.platforms), locale: pick(AttributeIndexTests.locales),
                    timeZone: pick(AttributeIndexTests.zones), appVersion: pick(AttributeIndexTests.versions),
                    seenDay: 20_000 + Int32(random.next() % 400))
                values.append(value)
                attributes[token] = value
                for topic in ["a", "b", "c"] where random.next() % 2 == 0 { topics[topic, default: []].insert(token) }
            }
            entries.append(.described(project: 1, tokens: tokens, values: values))
            for (topic, members) in topics { entries.append(.subscribed(project: 1, topic: topic, tokens: members.sorted())) }
            registered = Set(tokens)
            index.applyOwn(entries.enumerated().map { FeedEntry(id: Int64($0.offset + 1), change: $0.element) })
        }

        /// What `filter` accepts, token by token.
        func matches(_ token: UInt32, _ filter: AttributeFilter) -> Bool {
            guard let value = attributes[token] else { return false }
            if let platforms = filter.platforms, !platforms.contains(where: { $0 == value.platform }) { return false }
            if let ranges = filter.localeRanges {
                guard let locale = value.locale, ranges.contains(where: { locale == $0 || locale.hasPrefix($0 + "-") })
                else { return false }
            }
            if let zones = filter.timeZones, !zones.contains(where: { $0 == value.timeZone }) { return false }
            if let range = filter.appVersion {
                guard let version = value.appVersion, range.contains(version.split(separator: ".").map { Int($0)! })
                else { return false }
            }
            if let day = filter.seenOnOrAfterDay, value.seenDay < day { return false }
            return true
        }
    }

    static let filters: [AttributeFilter] = [
        AttributeFilter(),
        AttributeFilter(platforms: ["ios"]),
        AttributeFilter(platforms: ["ios", "web"], localeRanges: ["fr"]),
        AttributeFilter(localeRanges: ["fr-ca", "de"], timeZones: ["Europe/Paris"]),
        AttributeFilter(appVersion: VersionRange(min: [5, 0], max: [5, 99])),
        AttributeFilter(appVersion: VersionRange(min: [5, 0, 1])),
        AttributeFilter(seenOnOrAfterDay: 20_300),
        AttributeFilter(platforms: ["android"], localeRanges: ["fr"], seenOnOrAfterDay: 20_370),
        AttributeFilter(platforms: ["ios"], localeRanges: ["en"], timeZones: ["Asia/Tokyo"],
                        appVersion: VersionRange(max: [6]), seenOnOrAfterDay: 20_001),
        AttributeFilter(localeRanges: ["es"]),
        AttributeFilter(seenOnOrAfterDay: 30_000),
    ]

    static let conditions = [
        "'a' in topics", "'a' in topics && 'b' in topics", "'a' in topics || !('c' in topics)",
        "!('b' in topics)",
    ]

    @Test("A where narrows counts and pages exactly as checking each token would", arguments: [1, 2, 3] as [UInt64])
    func countsMatchEachToken(seed: UInt64) throws {
        let world = World(seed: seed)
        let snapshot = world.index.snapshot(of: 1)
        for source in Self.conditions {
            let expression = try Condition(parsing: source).expression
            let reached = snapshot.evaluate(expression)
            for filter in Self.filters {
                let expected = reached.ids.filter { world.matches($0, filter) }
                #expect(snapshot.count(expression, where: filter) == expected.count, "\(source) \(filter)")
                // The count and each topic's narrowed subscribers, from one pass.
                let both = snapshot.counts(expression, topics: ["a", "b", "c", "none"], where: filter)
                #expect(both.count == expected.count)
                for topic in ["a", "b", "c", "none"] {
                    #expect(
                        both.topicCounts[topic] == world.topics[topic, default: []].filter { world.matches($0, filter) }.count,
                        "\(topic) \(filter)")
                }
                #expect(Array(snapshot.evaluate(expression, where: filter).ids) == expected)
                let after = expected.count > 3 ? expected[3] : nil
                let page = snapshot.ids(of: expression, after: after, limit: 50, where: filter)
                #expect(page == Array(expected.dropFirst(after == nil ? 0 : 4).prefix(50)))
                let listed = Array(world.registered).sorted()
                #expect(snapshot.matching(listed, where: filter) == listed.filter { world.matches($0, filter) })
            }
        }
    }

    @Test("Describing a token again moves it out of every value it had; seeing it moves its day alone")
    func redescribing() {
        var world = World(seed: 9)
        let token = world.attributes.keys.sorted()[5]
        // Counted once before the change, so that the unions of several values a filter asks for are
        // kept: they must not outlive the bitmaps they were made of.
        for filter in Self.filters {
            _ = world.index.snapshot(of: 1).matching(world.registered.sorted(), where: filter)
        }
        let now = IndexedAttributes(platform: "web", locale: "de", timeZone: nil, appVersion: "6.0", seenDay: 20_100)
        world.index.applyOwn([FeedEntry(id: 100, change: .described(project: 1, tokens: [token], values: [now]))])
        #expect(world.index.snapshot(of: 1).attributes.attributes(of: token) == now)
        world.index.applyOwn([FeedEntry(id: 101, change: .seen(project: 1, tokens: [token], day: 20_555))])
        var seen = now
        seen.seenDay = 20_555
        #expect(world.index.snapshot(of: 1).attributes.attributes(of: token) == seen)
        world.attributes[token] = seen
        // Every other count still agrees with each token's own values.
        let snapshot = world.index.snapshot(of: 1)
        for filter in Self.filters {
            let expected = world.registered.filter { world.matches($0, filter) }.count
            #expect(snapshot.count(.topic("a", SourceRange(offset: 0, length: 0)), where: filter)
                == world.topics["a", default: []].filter { world.matches($0, filter) }.count)
            #expect(snapshot.matching(world.registered.sorted(), where: filter).count == expected)
        }
    }

    @Test("Days on or after a bound, from the bit slices, for every bound around the days in use")
    func daySlices() {
        var slices = DaySlices()
        // Scattered tokens with scattered days, and a stretch of consecutive tokens whose days
        // go up one by one (its slices become run containers).
        var days: [UInt32: Int32] = Dictionary(uniqueKeysWithValues: (0..<300).map { (UInt32($0 * 37), Int32(20_000 + $0 % 97)) })
        for token in UInt32(20_000)..<30_000 { days[token] = 20_000 + Int32(token / 97 % 90) }
        for (token, day) in days { slices.set([token], to: day) }
        // A whole second chunk seen within 64 days: the high bits those days share are slices
        // every token of the chunk is in.
        let wholeChunk = UInt32(65_536)..<131_072
        for offset in Int32(0)..<64 {
            let tokens = wholeChunk.filter { Int32($0 % 64) == offset }
            slices.set(tokens, to: 20_000 + offset)
            for token in tokens { days[token] = 20_000 + offset }
        }
        for bit in slices.slices.indices { slices.slices[bit].runOptimize() }
        #expect(slices.slices.contains { if case .run? = $0.container(forKey: 0) { true } else { false } })
        #expect(slices.slices.contains { if case .run(_, 65_536)? = $0.container(forKey: 1) { true } else { false } })
        let registers = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: 3 * 1024)
        defer { registers.deallocate() }
        for key: UInt16 in [0, 1] {
            for bound in Int32(19_990)...20_100 {
                let words = UnsafeMutableBufferPointer(rebasing: registers[0..<1024])
                words.update(repeating: ~0)
                slices.keep(
                    onOrAfter: bound, key: key, words, greater: UnsafeMutableBufferPointer(rebasing: registers[1024..<2048]),
                    spare: UnsafeMutableBufferPointer(rebasing: registers[2048..<3072]))
                // Exactly the chunk's tokens on or after the bound: each of them kept, and nothing
                // else (ids that never had a day read as day 0, before every bound).
                let expected = days.filter { $0.value >= bound && RoaringBitmap.chunk(of: $0.key) == key }.keys
                #expect(
                    expected.allSatisfy { words[Int($0 >> 6 & 1023)] & (1 << UInt64($0 & 63)) != 0 }, "bound \(bound)")
                #expect(words.reduce(0) { $0 + $1.nonzeroBitCount } == expected.count, "chunk \(key) bound \(bound)")
            }
        }
        for (token, day) in days where token % 101 == 0 { #expect(slices.day(of: token) == day) }
    }

    @Test("described and seen entries go through the feed's rows unchanged; seen entries of one day merge")
    func feedRows() {
        let values = [
            IndexedAttributes(platform: "ios", locale: "fr-CA", timeZone: "Europe/Paris", appVersion: "5.1", seenDay: 20_400),
            IndexedAttributes(platform: nil, locale: nil, timeZone: nil, appVersion: nil, seenDay: 0),
        ]
        for change in [
            AudienceChange.described(project: 3, tokens: [7, 9], values: values),
            .seen(project: 3, tokens: [1, 2, 3], day: 20_419),
        ] {
            #expect(FeedRow(change).change == change)
        }
        #expect(values[0].locale == "fr-ca")
        // A row this version cannot read makes followers reload rather than miss it.
        #expect(FeedRow(project: 3, kind: "described", topic: "[{", tokenIDs: TokenIDList.encode([1])).change == .reset)
        let log = ChangeLog()
        log.record(.seen(project: 1, tokens: [1], day: 5))
        log.record(.seen(project: 1, tokens: [2], day: 5))
        log.record(.seen(project: 1, tokens: [3], day: 6))
        #expect(log.changes == [.seen(project: 1, tokens: [1, 2], day: 5), .seen(project: 1, tokens: [3], day: 6)])
    }

    @Test("Built from rows at load: one bitmap per value, a locale's spellings as one, over many chunks")
    func builder() {
        var builder = TokenAttributeIndex.Builder()
        let rows: [(UInt32, String?, String?)] = [
            (1, "ios", "fr-CA"), (2, "android", "FR-ca"), (3, nil, "fr-CA"), (70_000, "ios", "FR-ca"), (70_001, "web", nil),
            (200_000, "ios", "de"),
        ]
        for (token, platform, locale) in rows {
            builder.add(token, platform: platform, locale: locale, timeZone: nil, appVersion: nil, seenDay: 20_000 + Int32(token % 5))
        }
        let index = builder.finish()
        #expect(Array(index.locales["fr-ca"]?.ids ?? RoaringBitmap().ids) == [1, 2, 3, 70_000])
        #expect(index.locales.keys.sorted() == ["de", "fr-ca"])
        #expect(Array(index.platforms["ios"]?.ids ?? RoaringBitmap().ids) == [1, 70_000, 200_000])
        for (token, _, _) in rows { #expect(index.seen.day(of: token) == 20_000 + Int32(token % 5)) }
    }

    @Test("Rows given as bytes build what the same rows as strings build, over thousands of distinct values")
    func builderFromBytes() {
        var fromStrings = TokenAttributeIndex.Builder()
        var fromBytes = TokenAttributeIndex.Builder()
        var expected: [String: [UInt32]] = [:]
        for token in stride(from: UInt32(0), to: 300_000, by: 7) {
            // 3,000 versions make the interner's table grow many times over; every seventh token has none.
            let version: String? = token % 49 == 0 ? nil : "5.\(token % 3_000).\(token % 2)"
            let values = ["ios", "fr-CA", "Europe/Paris", version]
            if let version { expected[version, default: []].append(token) }
            fromStrings.add(
                token, platform: values[0], locale: values[1], timeZone: values[2], appVersion: values[3],
                seenDay: 20_000 + Int32(token % 9))
            var utf8 = values.map { $0.map { Array($0.utf8) } }
            utf8.append(nil)
            utf8[0]!.withUnsafeBytes { platform in
                utf8[1]!.withUnsafeBytes { locale in
                    utf8[2]!.withUnsafeBytes { zone in
                        if let version = utf8[3] {
                            version.withUnsafeBytes { version in
                                fromBytes.add(token, utf8: (platform, locale, zone, version), seenDay: 20_000 + Int32(token % 9))
                            }
                        } else {
                            fromBytes.add(token, utf8: (platform, locale, zone, nil), seenDay: 20_000 + Int32(token % 9))
                        }
                    }
                }
            }
        }
        let (strings, bytes) = (fromStrings.finish(), fromBytes.finish())
        #expect(strings.namedBitmaps == bytes.namedBitmaps)
        #expect(strings.seen.slices == bytes.seen.slices && strings.seen.highest == bytes.seen.highest)
        #expect(bytes.appVersions.count == expected.count && expected.count > 2_900)
        #expect(bytes.appVersions.allSatisfy { Array($0.value.ids) == expected[$0.key] })
        #expect(Array(bytes.locales.keys) == ["fr-ca"])
    }

    @Test("A checkpoint keeps every attribute bitmap and day slice")
    func checkpoint() throws {
        let world = World(seed: 4)
        let id = [UInt8](repeating: 7, count: 16)
        let bytes = AudienceCheckpoint.encode(
            AudienceCheckpoint.Contents(state: world.index.copyState(), fingerprint: []), databaseID: id)
        let restored = AudienceIndex()
        restored.restore(try AudienceCheckpoint.decode(bytes, databaseID: id).state)
        let (before, after) = (world.index.snapshot(of: 1).attributes, restored.snapshot(of: 1).attributes)
        #expect(before.namedBitmaps == after.namedBitmaps)
        #expect(before.seen.slices == after.seen.slices)
        #expect(after.seen.highest == before.seen.highest && after.seen.highest > 0)
        #expect(after.namedBitmaps.allSatisfy { !$0.isEmpty })
    }
}

@Suite("Audience index: the attributes loaded from the tables equal those the feed carried", .onEveryBackend)
struct AttributeLoadTests {
    @Test("Writes that describe, see, import and unregister tokens leave the index as a load from the tables has it")
    func loadEqualsFeed() async throws {
        let (registry, project) = try await makeRegistry()
        var changes: [(token: String, change: TokenAttributeChange)] = []
        for n in 0..<40 {
            var change = TokenAttributeChange()
            change.platform = n % 4 == 3 ? .keep : .set(TokenAttributes.Platform.allCases[n % 3])
            change.locale = n % 5 == 0 ? .clear : .set(["fr-CA", "en-GB", "de"][n % 3])
            change.timeZone = .set(n % 2 == 0 ? "Europe/Paris" : "Asia/Tokyo")
            change.appVersion = .set("5.\(n % 7)")
            if n % 3 == 0 { change.lastSeenAt = Date().addingTimeInterval(-Double(n) * 86_400) }
            changes.append((token(n), change))
        }
        _ = try await registry.updateTokens(changes, in: project)
        // Named by registration calls (seen now), changed again, one unregistered.
        _ = try await registry.subscribe((30..<50).map(token), to: "news", in: project)
        var again = TokenAttributeChange()
        again.platform = .clear
        again.locale = .set("fr")
        _ = try await registry.updateTokens([(token(3), again), (token(4), again)], in: project)
        _ = try await registry.unregisterToken(token(6), in: project)
        try await registry.catchUp()
        let kept = registry.audience.snapshot(of: project.rowID)
        let load = try await registry.feed.loadAudience()
        let loaded = try #require(load.attributes[project.rowID])
        for id in UInt32(1)...60 {
            #expect(kept.attributes.attributes(of: id) == loaded.attributes(of: id), "token id \(id)")
        }
        let ids = try await registry.store.tokenIDs([token(4), token(45), token(9)], in: project)
        let fourth = loaded.attributes(of: try #require(ids[token(4)]))
        #expect(fourth.locale == "fr")
        #expect(fourth.platform == nil)
        #expect(fourth.timeZone == "Europe/Paris")
        let today = SeenDay.of(secondsSince1970: Date().timeIntervalSince1970)
        #expect(loaded.attributes(of: try #require(ids[token(45)])).seenDay == today)
        #expect(loaded.attributes(of: try #require(ids[token(9)])).seenDay == today - 9)
    }
}
