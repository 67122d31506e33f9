import Foundation

/// Builds a reproducible synthetic registry for benchmarks: N tokens, M topics and about S
/// subscriptions, with topic popularity skewed like real apps (Zipf-like, the largest topic
/// holding about 20% of the tokens).
///
/// The shape lives here; each store writes it its own fastest way (`generate(into:)`): plain SQL in
/// large transactions on SQLite, `COPY` on PostgreSQL, the token index of `subscription` built
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

    /// Rows a generator writes between progress reports.
    public static let progressStep = 10_000

    /// Rows the generator writes: tokens, topics and subscriptions, for a progress line's total.
    public func rowCount() -> Int {
        tokens + topics + topicSizes().reduce(0, +)
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
    public static func sample(_ count: Int, from total: Int, using random: inout SplitMix64) -> [Int] {
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
