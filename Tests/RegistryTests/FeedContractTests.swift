@testable import AudienceEngine
import Registry
import RegistrySQLite
import Synchronization
import Testing

/// The change-feed contract for a backend whose ids are not commit-ordered, as PostgreSQL's
/// sequences are not: several writers take ids as they begin and commit in any order, so id 8
/// can commit, and be read, before id 7 does.
///
/// As row locks do, writes in flight at once touch distinct tokens: two writes to the same token
/// take their ids in the order they commit (see `RegistryStore`'s isolation notes).
final class OutOfOrderFeed: ChangeFeed, Sendable {
    private struct State {
        var nextID: Int64 = 1
        /// Begun, not committed yet, and what each will change.
        var inFlight: [Int64: AudienceChange] = [:]
        var committed: [Int64: AudienceChange] = [:]
        /// The tables: topic members and registered tokens, as committed so far.
        var topics: [String: Set<UInt32>] = [:]
        var registered: Set<UInt32> = []
    }

    static let project: Int64 = 1
    private let state = Mutex(State())

    /// Starts a write that will make `change`; returns its id.
    func begin(_ change: AudienceChange) -> Int64 {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.inFlight[id] = change
            return id
        }
    }

    /// Commits the write `id`: its change reaches the tables and the feed together.
    @discardableResult
    func commit(_ id: Int64) -> FeedEntry {
        state.withLock { state in
            let change = state.inFlight.removeValue(forKey: id)!
            state.committed[id] = change
            switch change {
            case .subscribed(_, let topic, let tokens): state.topics[topic, default: []].formUnion(tokens)
            case .unsubscribed(_, let topic, let tokens): state.topics[topic, default: []].subtract(tokens)
            case .registered(_, let tokens): state.registered.formUnion(tokens)
            case .unregistered(_, let tokens): state.registered.subtract(tokens)
            case .described, .seen, .reset: break
            }
            return FeedEntry(id: id, change: change)
        }
    }

    /// Ids below the oldest write in flight have all committed (or never will).
    private static func settled(_ state: State) -> Int64 {
        (state.inFlight.keys.min() ?? state.nextID) - 1
    }

    func loadAudience() async throws -> AudienceLoad {
        state.withLock { state in
            let settled = Self.settled(state)
            let topics = state.topics.filter { !$0.value.isEmpty }.mapValues { $0.sorted() }
            return AudienceLoad(
                projects: [Self.project: (topics, state.registered.sorted())],
                cursor: FeedCursor(watermark: settled, seenAbove: state.committed.keys.filter { $0 > settled }.sorted()))
        }
    }

    func changes(after cursor: FeedCursor, limit: Int) async throws -> FeedRead {
        state.withLock { state in
            let seen = Set(cursor.seenAbove)
            let unread = state.committed.keys.filter { $0 > cursor.watermark && !seen.contains($0) }.sorted()
            let read = Array(unread.prefix(limit))
            // The watermark moves past what is settled and read: never past a write in flight,
            // never past an unread change.
            var watermark = max(cursor.watermark, Self.settled(state))
            if read.count < unread.count, let last = read.last { watermark = min(watermark, last) }
            let seenAbove = (cursor.seenAbove + read).filter { $0 > watermark }.sorted()
            return FeedRead(
                entries: read.map { FeedEntry(id: $0, change: state.committed[$0]!) }, truncated: false,
                next: FeedCursor(watermark: watermark, seenAbove: seenAbove))
        }
    }

    func unread(after cursor: FeedCursor) async throws -> Int64 {
        let seen = Set(cursor.seenAbove)
        return Int64(state.withLock { $0.committed.keys.filter { $0 > cursor.watermark && !seen.contains($0) }.count })
    }

    /// Writes in flight at once touch distinct tokens here, so an own write right after the
    /// watermark has nothing committed before it left unread.
    var idsFollowCommitOrder: Bool { true }

    func head() async throws -> FeedCursor {
        state.withLock { FeedCursor(watermark: Self.settled($0)) }
    }

    func fingerprint(at cursor: FeedCursor) async throws -> [UInt8]? { nil }

    func wakeUps() -> AsyncStream<Void> { AsyncStream { $0.finish() } }
}

@Suite("Change feed contract")
struct FeedContractTests {
    static func contents(_ index: AudienceIndex) -> [String: [UInt32]] {
        let snapshot = index.snapshot(of: OutOfOrderFeed.project)
        var contents = snapshot.topics.mapValues { Array($0.bitmap.ids) }.filter { !$0.value.isEmpty }
        contents["(registered)"] = Array(snapshot.registered.ids)
        return contents
    }

    static func catchUp(_ index: AudienceIndex, from feed: OutOfOrderFeed, limit: Int) async throws {
        while true {
            let cursor = index.cursor
            let read = try await feed.changes(after: cursor, limit: limit)
            index.apply(read, after: cursor)
            if read.entries.isEmpty { return }
        }
    }

    @Test("Id 7 committing after id 8: a follower that read 8 first still gets 7")
    func lateLowerID() async throws {
        let feed = OutOfOrderFeed()
        let index = AudienceIndex()
        index.load(try await feed.loadAudience())
        let seven = feed.begin(.subscribed(project: 1, topic: "news", tokens: [7]))
        let eight = feed.begin(.subscribed(project: 1, topic: "news", tokens: [8]))
        feed.commit(eight)
        try await Self.catchUp(index, from: feed, limit: 100)
        #expect(Self.contents(index)["news"] == [8])
        #expect(index.cursor == FeedCursor(watermark: seven - 1, seenAbove: [eight]))
        feed.commit(seven)
        try await Self.catchUp(index, from: feed, limit: 100)
        #expect(Self.contents(index)["news"] == [7, 8])
        #expect(index.cursor == FeedCursor(watermark: eight))
    }

    /// The writer hears its commit late (group commit answers after later batches commit): by
    /// then the follower has applied its change and another process's after it.
    @Test("An own write heard after the follower passed it does not undo what came after it")
    func lateOwnWrite() async throws {
        let feed = OutOfOrderFeed()
        let index = AudienceIndex()
        index.load(try await feed.loadAudience())
        let subscribed = feed.commit(feed.begin(.subscribed(project: 1, topic: "news", tokens: [5])))
        feed.commit(feed.begin(.unsubscribed(project: 1, topic: "news", tokens: [5])))
        try await Self.catchUp(index, from: feed, limit: 100)
        #expect(Self.contents(index)["news"] == nil)
        index.applyOwn([subscribed])
        #expect(Self.contents(index)["news"] == nil)
    }

    /// PostgreSQL's ids are transaction ids: the id right after the watermark may belong to a
    /// write that committed after another process's, still unread, on the same token.
    @Test("Where ids do not follow commit order, an own write is applied but leaves the cursor to the follower")
    func ownWriteLeavesCursor() async throws {
        let feed = OutOfOrderFeed()
        let index = AudienceIndex()
        index.load(try await feed.loadAudience())
        let start = index.cursor
        let own = FeedEntry(id: start.watermark + 1, change: .subscribed(project: 1, topic: "news", tokens: [5]))
        index.applyOwn([own], idsFollowCommitOrder: false)
        #expect(Self.contents(index)["news"] == [5])
        #expect(index.cursor == start)
        index.applyOwn([own], idsFollowCommitOrder: true)
        #expect(index.cursor == FeedCursor(watermark: own.id))
    }

    /// Two requests of one batch resume in any order: the later write can be heard first.
    @Test("Own writes heard out of order end in commit order once the follower has passed them")
    func ownWritesOutOfOrder() async throws {
        let feed = OutOfOrderFeed()
        let index = AudienceIndex()
        index.load(try await feed.loadAudience())
        let subscribed = feed.commit(feed.begin(.subscribed(project: 1, topic: "news", tokens: [5])))
        let unsubscribed = feed.commit(feed.begin(.unsubscribed(project: 1, topic: "news", tokens: [5])))
        index.applyOwn([unsubscribed])
        index.applyOwn([subscribed])
        #expect(Self.contents(index)["news"] == [5])
        try await Self.catchUp(index, from: feed, limit: 100)
        #expect(Self.contents(index)["news"] == nil)
    }

    @Test("A read that started before the index moved is ignored, and the cursor never goes back")
    func staleRead() async throws {
        let feed = OutOfOrderFeed()
        let index = AudienceIndex()
        index.load(try await feed.loadAudience())
        let start = index.cursor
        feed.commit(feed.begin(.registered(project: 1, tokens: [1])))
        let early = try await feed.changes(after: start, limit: 100)
        feed.commit(feed.begin(.registered(project: 1, tokens: [2])))
        try await Self.catchUp(index, from: feed, limit: 100)
        let caughtUp = index.cursor
        #expect(!index.apply(early, after: start))
        #expect(index.cursor == caughtUp)
    }

    /// Writers in three processes, each with its own index: every write is in its writer's index
    /// as soon as it commits, and every index follows the feed at random moments, in reads of a
    /// random size. Whatever the interleaving, each ends equal to a fresh load.
    @Test("Random writers committing out of id order: every index ends equal to a fresh load", arguments: 1...25)
    func randomInterleavings(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let feed = OutOfOrderFeed()
        let indexes = (0..<3).map { _ in AudienceIndex() }
        for index in indexes { index.load(try await feed.loadAudience()) }
        // Writes in flight: id, the index of the process that made it.
        var inFlight: [(id: Int64, process: Int, token: UInt32)] = []
        for _ in 0..<300 {
            switch random.next() % 4 {
            case 0, 1:
                // Begin a write on a token no write in flight touches (row locks).
                let busy = Set(inFlight.map(\.token))
                let token = UInt32(random.next() % 40)
                guard !busy.contains(token) else { continue }
                let topic = "t\(random.next() % 3)"
                let change: AudienceChange =
                    switch random.next() % 4 {
                    case 0: .unsubscribed(project: 1, topic: topic, tokens: [token])
                    case 1: .registered(project: 1, tokens: [token])
                    case 2: .unregistered(project: 1, tokens: [token])
                    default: .subscribed(project: 1, topic: topic, tokens: [token])
                    }
                inFlight.append((feed.begin(change), Int(random.next() % 3), token))
            case 2:
                // Commit one of the writes in flight, not necessarily the oldest.
                guard !inFlight.isEmpty else { continue }
                let write = inFlight.remove(at: Int(random.next() % UInt64(inFlight.count)))
                indexes[write.process].applyOwn([feed.commit(write.id)])
            default:
                let index = indexes[Int(random.next() % 3)]
                try await Self.catchUp(index, from: feed, limit: Int(1 + random.next() % 5))
            }
        }
        for write in inFlight { indexes[write.process].applyOwn([feed.commit(write.id)]) }
        let fresh = AudienceIndex()
        fresh.load(try await feed.loadAudience())
        for index in indexes {
            try await Self.catchUp(index, from: feed, limit: 7)
            #expect(Self.contents(index) == Self.contents(fresh), "seed \(seed)")
            #expect(index.cursor == fresh.cursor, "seed \(seed)")
        }
    }
}
