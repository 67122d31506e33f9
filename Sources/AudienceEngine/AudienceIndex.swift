import Conditions
import Synchronization

/// The process's in-memory index of who is subscribed to what: per project, each topic's token
/// ids and the set of registered tokens (what `!` ranges over).
///
/// The tables stay the source of truth. The index is loaded from them with the feed cursor they
/// reflect, then changed two ways:
/// - this process's own writes, at once, as each commits (``applyOwn(_:)``): a request reads its
///   own writes;
/// - the feed, in order, by the one follower (``apply(_:)``), which moves the cursor and carries
///   every process's writes, this one's included.
///
/// Every change is a set operation (insert or remove ids), so applying one twice changes nothing,
/// and the follower applying the feed in its order leaves the index equal to the tables whatever
/// the own writes did in between: an own write applied early is applied again at its place.
///
/// Readers take a snapshot and compute outside the lock. Members are kept in `RoaringBitmap`s,
/// whose copy-on-write is per 65,536-id container: a change applied while a reader holds a
/// snapshot copies one container, never a whole topic.
public final class AudienceIndex: Sendable {
    /// One project's part of the index.
    public struct Snapshot: Sendable {
        public internal(set) var topics: [String: TopicMembers] = [:]
        public internal(set) var registered = RoaringBitmap()
        /// What the project's tokens say of their devices, and when they were last seen.
        public internal(set) var attributes = TokenAttributeIndex()

        /// The token ids subscribed to `topic`.
        public func members(of topic: String) -> TopicMembers {
            topics[topic] ?? .small([])
        }

        /// The set of token ids `expression` reaches, of those matching `filter` when given: `!`
        /// ranges over registered tokens.
        public func evaluate(_ expression: Expression, where filter: AttributeFilter? = nil) -> RoaringBitmap {
            algebra(filter).evaluate(expression)
        }

        /// How many tokens `expression` reaches (of those matching `filter`), without building the set.
        public func count(_ expression: Expression, where filter: AttributeFilter? = nil) -> Int {
            algebra(filter).count(expression)
        }

        /// Up to `limit` ids `expression` reaches (of those matching `filter`), greater than
        /// `after`, ascending; computed one 65,536-id chunk at a time and only as far as the page
        /// needs, so a page costs what it covers, not what the whole audience would.
        public func ids(of expression: Expression, after: UInt32?, limit: Int, where filter: AttributeFilter? = nil)
            -> [UInt32]
        {
            algebra(filter).ids(of: expression, after: after, limit: limit)
        }

        /// How many tokens `expression` reaches and how many subscribers of each of `topics`,
        /// of those matching `filter`, in one pass.
        public func counts(_ expression: Expression, topics: [String], where filter: AttributeFilter) -> (
            count: Int, topicCounts: [String: Int]
        ) {
            let (count, perTopic) = algebra(filter).counts(expression, topics: topics)
            return (count, Dictionary(zip(topics, perTopic), uniquingKeysWith: { first, _ in first }))
        }

        /// Those of `tokens` (a device group's members, a token named alone) that are registered
        /// and match `filter`, in order.
        public func matching(_ tokens: [UInt32], where filter: AttributeFilter) -> [UInt32] {
            let resolved = attributes.resolve(filter)
            return tokens.filter { registered.contains($0) && resolved.matches($0) }
        }

        private func algebra(_ filter: AttributeFilter?) -> WordwiseAlgebra {
            WordwiseAlgebra(
                universe: registered, topics: topics,
                filter: filter.flatMap { $0.isEmpty ? nil : attributes.resolve($0) })
        }
    }

    /// Everything the index holds; what a checkpoint saves.
    public struct State: Sendable {
        package var projects: [Int64: Snapshot] = [:]
        package var cursor = FeedCursor.start
        /// The feed said entries were missed (pruned, or a bulk write): the follower must reload.
        package var stale = false
    }

    private let state = Mutex(State())

    public init() {}

    /// A copy of the whole index, taken under the lock (copy-on-write: it costs nothing until
    /// the next change) and read outside it.
    package func copyState() -> State {
        state.withLock { $0 }
    }

    /// Replaces the whole index, as a checkpoint had it.
    package func restore(_ restored: State) {
        state.withLock { $0 = restored }
    }

    /// A consistent view of one project's index.
    public func snapshot(of project: Int64) -> Snapshot {
        state.withLock { $0.projects[project] ?? Snapshot() }
    }

    /// Where the follower stands in the feed.
    public var cursor: FeedCursor {
        state.withLock { $0.cursor }
    }

    /// The cursor's watermark: every change with an id up to it is applied.
    public var position: Int64 {
        cursor.watermark
    }

    /// Whether the index missed changes and must be reloaded from the tables.
    public var isStale: Bool {
        state.withLock { $0.stale }
    }

    /// Asks for a reload from the tables at the follower's next round: for a cursor the feed can no
    /// longer be read after, while the tables can.
    package func markStale() {
        state.withLock { $0.stale = true }
    }

    /// Replaces the whole index with what the tables hold at `load.cursor`.
    package func load(_ load: AudienceLoad) {
        var projects: [Int64: Snapshot] = [:]
        for (project, audience) in load.projects {
            var snapshot = Snapshot()
            for (topic, ids) in audience.topics { snapshot.topics[topic] = TopicMembers(sortedIDs: ids) }
            snapshot.registered = RoaringBitmap(sortedIDs: audience.registered)
            snapshot.attributes = load.attributes[project] ?? TokenAttributeIndex()
            projects[project] = snapshot
        }
        state.withLock { state in
            state = State(projects: projects, cursor: load.cursor, stale: false)
        }
    }

    /// Applies what the follower read after `cursor`, in order, and moves the cursor past it.
    /// A read that does not start where the index stands (a reload or another read moved it
    /// meanwhile) is ignored: the next read starts from where it stands now.
    /// - Returns: whether the read was applied.
    @discardableResult
    package func apply(_ read: FeedRead, after cursor: FeedCursor) -> Bool {
        state.withLock { state in
            guard state.cursor == cursor else { return false }
            if read.truncated {
                state.stale = true
                return true
            }
            Self.apply(read.entries, to: &state)
            state.cursor = read.next
            return true
        }
    }

    /// Applies this process's own committed writes at once, ahead of the follower, which applies
    /// them again in their place. When ids follow commit order without gaps, an entry right after
    /// the cursor (every change before it is in already, as in a single process, where every
    /// change is its own) moves the cursor past it: applied in its place, the follower need not
    /// read it. Where they do not (several writers), the id right after the watermark says
    /// nothing of what others committed first, and the follower reads every entry. An entry the
    /// cursor has already passed is not applied: the follower has put it in order with what
    /// others committed after it, and applying it again now would undo them.
    package func applyOwn(_ entries: [FeedEntry], idsFollowCommitOrder: Bool = true) {
        guard !entries.isEmpty else { return }
        state.withLock { state in
            for entry in entries
            where entry.id > state.cursor.watermark && !state.cursor.seenAbove.contains(entry.id) {
                Self.apply([entry], to: &state)
                if idsFollowCommitOrder, state.cursor.seenAbove.isEmpty, entry.id == state.cursor.watermark + 1 {
                    state.cursor.watermark = entry.id
                }
            }
        }
    }

    private static func apply(_ entries: [FeedEntry], to state: inout State) {
        for entry in entries {
            switch entry.change {
            case .subscribed(let project, let topic, let tokens):
                state.projects[project, default: Snapshot()].topics[topic, default: .small([])]
                    .insert(contentsOf: tokens)
            case .unsubscribed(let project, let topic, let tokens):
                state.projects[project, default: Snapshot()].remove(tokens, from: topic)
            case .registered(let project, let tokens):
                state.projects[project, default: Snapshot()].registered.insert(contentsOf: tokens)
            case .unregistered(let project, let tokens):
                state.projects[project, default: Snapshot()].registered.remove(contentsOf: tokens)
            case .described(let project, let tokens, let values):
                state.projects[project, default: Snapshot()].attributes.describe(tokens, as: values)
            case .seen(let project, let tokens, let day):
                state.projects[project, default: Snapshot()].attributes.see(tokens, on: day)
            case .reset:
                state.stale = true
            }
        }
    }

    /// Subscriptions and registered tokens held, and an estimate of the heap bytes they take.
    public func size() -> (subscriptions: Int, registered: Int, bytes: Int) {
        state.withLock { state in
            var result = (subscriptions: 0, registered: 0, bytes: 0)
            for snapshot in state.projects.values {
                result.registered += snapshot.registered.count
                result.bytes += snapshot.registered.byteCount + snapshot.attributes.byteCount
                for (name, members) in snapshot.topics {
                    result.subscriptions += members.count
                    result.bytes += members.byteCount + name.utf8.count
                }
            }
            return result
        }
    }
}

extension AudienceIndex.Snapshot {
    fileprivate mutating func remove(_ tokens: [UInt32], from topic: String) {
        guard topics[topic] != nil else { return }
        topics[topic]!.remove(contentsOf: tokens)
        if topics[topic]!.isEmpty { topics[topic] = nil }
    }
}
