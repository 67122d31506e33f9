import AudienceEngine
import Foundation
import GRDB
import Registry

/// Builds a reproducible synthetic registry for benchmarks: N tokens, M topics and about S
/// subscriptions, with topic popularity skewed like real apps (Zipf-like, the largest topic
/// holding about 20% of the tokens).
///
/// It writes with plain SQL in large transactions and builds the token index of `subscription`
/// once at the end, so the 1M-token / 10k-topic / 5M-subscription registry takes a minute or two.
public struct SyntheticRegistry: Sendable {
    public var tokens: Int
    public var topics: Int
    public var subscriptions: Int
    public var seed: UInt64
    /// The share of all tokens the most popular topic holds.
    public var largestTopicShare = 0.2

    public init(tokens: Int, topics: Int, subscriptions: Int, seed: UInt64) {
        self.tokens = tokens
        self.topics = topics
        self.subscriptions = subscriptions
        self.seed = seed
    }

    /// Subscriber counts per topic, most popular first: `largest / (k+1)^s` with `s` chosen so that they add up to `subscriptions`.
    public func topicSizes() -> [Int] {
        let largest = min(Double(tokens) * largestTopicShare, Double(subscriptions))
        func total(_ s: Double) -> Double { (0..<topics).reduce(0) { $0 + largest / pow(Double($1 + 1), s) } }
        var low = 0.0
        var high = 8.0
        for _ in 0..<60 {
            let mid = (low + high) / 2
            if total(mid) > Double(subscriptions) { low = mid } else { high = mid }
        }
        return (0..<topics).map { max(1, min(tokens, Int((largest / pow(Double($0 + 1), high)).rounded()))) }
    }

    /// Fills `database` (which must have no projects) with one project and the synthetic data.
    /// - Returns: the project and its server key.
    public func generate(
        into store: SQLiteStore, projectId: String = "bench", senderId: String = "200000000000"
    )
        async throws -> (Project, serverKey: String)
    {
        let database = store.database
        let registry = try await RegistryService(store: store)
        let (project, key) = try await registry.createProject(projectId: projectId, senderId: senderId)
        var random = SplitMix64(seed: seed)
        let (tokens, topics, seed) = (tokens, topics, seed)
        let sizes = topicSizes()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await database.writer.write { db in
            let insertToken = try db.makeStatement(
                sql:
                    "INSERT INTO token (id, projectId, value, state, createdAt, updatedAt) VALUES (?, ?, ?, 'registered', ?, ?)"
            )
            for id in 1...tokens {
                try insertToken.execute(arguments: [id, project.rowID, Self.tokenValue(seed: seed, id: id), now, now])
            }
            let insertTopic = try db.makeStatement(
                sql: "INSERT INTO topic (id, projectId, name, createdAt) VALUES (?, ?, ?, ?)")
            for id in 1...topics {
                try insertTopic.execute(arguments: [id, project.rowID, "topic-\(id)", now])
            }
        }
        try await database.writer.writeWithoutTransaction { db in
            try db.execute(sql: "DROP INDEX subscription_tokenId")
        }
        // One transaction per batch of topics keeps the WAL small.
        for batch in stride(from: 0, to: topics, by: 500) {
            let range = batch..<min(batch + 500, topics)
            var rows: [(Int, [Int])] = []
            for topic in range {
                rows.append((topic + 1, Self.sample(sizes[topic], from: tokens, using: &random)))
            }
            let chunk = rows
            try await database.writer.write { db in
                let insert = try db.makeStatement(
                    sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?)")
                for (topic, members) in chunk {
                    for token in members {
                        try insert.execute(arguments: [topic, token, now])
                    }
                }
            }
        }
        try await database.writer.writeWithoutTransaction { db in
            try db.execute(sql: "CREATE INDEX subscription_tokenId ON subscription(tokenId)")
            try db.execute(sql: "ANALYZE")
        }
        // The rows above bypassed the feed: tell every follower to reload.
        try await database.writer.write { db in _ = try ChangeFeedSQL.insert([.reset], db, now: now) }
        return (project, key)
    }

    /// A token shaped like FCM's: a 22-character id, `:APA91b`, and 134 more characters (163 in all).
    public static func tokenValue(seed: UInt64, id: Int) -> String {
        var random = SplitMix64(seed: seed ^ (UInt64(id) &* 0xD1B5_4A32_D192_ED03))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(163)
        for _ in 0..<22 { bytes.append(alphabet[Int(random.next() & 63)]) }
        bytes += Array(":APA91b".utf8)
        for _ in 0..<134 { bytes.append(alphabet[Int(random.next() & 63)]) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `count` distinct token ids from 1...total, ascending (Floyd's sampling, or a shuffle when dense).
    static func sample(_ count: Int, from total: Int, using random: inout SplitMix64) -> [Int] {
        var chosen = Set<Int>(minimumCapacity: count)
        for j in (total - count + 1)...total {
            let pick = Int(random.next() % UInt64(j)) + 1
            chosen.insert(chosen.contains(pick) ? j : pick)
        }
        return chosen.sorted()
    }
}

/// A small, fast, seedable random generator, so a seed always gives the same registry.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
