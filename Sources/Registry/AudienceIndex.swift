import Conditions
import Synchronization

/// What a committed write changed, for the audience index.
public enum AudienceChange: Sendable, Hashable {
    case subscribed(project: Int64, topic: String, tokens: [UInt32])
    case unsubscribed(project: Int64, topic: String, tokens: [UInt32])
    case registered(project: Int64, token: UInt32)
    case unregistered(project: Int64, token: UInt32)
}

/// The server's in-memory index of who is subscribed to what: per project, each topic's token ids
/// as a sorted array, and the set of registered tokens (what `!` ranges over).
///
/// SQLite stays the source of truth: the index is loaded from it at start and changed only by
/// `apply`, which the store calls after each commit, before the writer hears of success. Readers
/// take a snapshot (copy-on-write arrays, so a snapshot costs nothing until the next write) and
/// compute outside the lock.
public final class AudienceIndex: Sendable {
    /// One project's part of the index.
    public struct Snapshot: Sendable {
        /// Sorted token ids per topic name.
        public fileprivate(set) var topics: [String: [UInt32]] = [:]
        public fileprivate(set) var registered = Bitmap(capacity: 0)
        /// One past the largest token id seen: the size of bitmaps built from this snapshot.
        public fileprivate(set) var capacity = 0

        /// The sorted token ids subscribed to `topic`.
        public func members(of topic: String) -> [UInt32] {
            topics[topic] ?? []
        }

        /// The set of token ids `expression` reaches: `!` ranges over registered tokens.
        public func evaluate(_ expression: Expression) -> Bitmap {
            switch expression {
            case .topic(let name, _):
                return Bitmap(capacity: capacity, ids: members(of: name))
            case .not(let operand, _):
                var result = registered
                result.subtract(evaluate(operand))
                return result
            case .and(let operands, _):
                // Start from the smallest topic: fewer bits to set, same result.
                var result = evaluate(operands[0])
                for operand in operands.dropFirst() { result.formIntersection(evaluate(operand)) }
                return result
            case .or(let operands, _):
                var result = evaluate(operands[0])
                for operand in operands.dropFirst() { result.formUnion(evaluate(operand)) }
                return result
            }
        }
    }

    private let projects = Mutex<[Int64: Snapshot]>([:])

    public init() {}

    /// A consistent view of one project's index.
    public func snapshot(of project: Int64) -> Snapshot {
        projects.withLock { $0[project] ?? Snapshot() }
    }

    /// Replaces a project's index wholesale (loading at start).
    public func load(project: Int64, topics: [String: [UInt32]], registered: [UInt32]) {
        var snapshot = Snapshot()
        snapshot.topics = topics
        let capacity = Int(max(registered.max() ?? 0, topics.values.compactMap(\.last).max() ?? 0)) + 1
        snapshot.capacity = capacity
        snapshot.registered = Bitmap(capacity: capacity, ids: registered)
        projects.withLock { $0[project] = snapshot }
    }

    /// Applies committed changes, in commit order.
    public func apply(_ changes: [AudienceChange]) {
        guard !changes.isEmpty else { return }
        projects.withLock { projects in
            for change in changes {
                switch change {
                case .subscribed(let project, let topic, let tokens):
                    projects[project, default: Snapshot()].add(tokens, to: topic)
                case .unsubscribed(let project, let topic, let tokens):
                    projects[project, default: Snapshot()].remove(tokens, from: topic)
                case .registered(let project, let token):
                    projects[project, default: Snapshot()].register(token)
                case .unregistered(let project, let token):
                    projects[project, default: Snapshot()].unregister(token)
                }
            }
        }
    }
}

extension AudienceIndex.Snapshot {
    fileprivate mutating func register(_ token: UInt32) {
        capacity = max(capacity, Int(token) + 1)
        registered.insert(token)
    }

    fileprivate mutating func unregister(_ token: UInt32) {
        registered.remove(token)
    }

    /// Merges `tokens` into the topic's sorted ids; new tokens (the largest ids) append at the end.
    fileprivate mutating func add(_ tokens: [UInt32], to topic: String) {
        let incoming = tokens.sorted()
        guard let largest = incoming.last else { return }
        capacity = max(capacity, Int(largest) + 1)
        let current = topics[topic] ?? []
        if let last = current.last, last >= incoming[0] {
            var merged: [UInt32] = []
            merged.reserveCapacity(current.count + incoming.count)
            var i = 0
            var j = 0
            while i < current.count || j < incoming.count {
                if j == incoming.count || (i < current.count && current[i] < incoming[j]) {
                    merged.append(current[i])
                    i += 1
                } else {
                    if i < current.count && current[i] == incoming[j] { i += 1 }
                    if merged.last != incoming[j] { merged.append(incoming[j]) }
                    j += 1
                }
            }
            topics[topic] = merged
        } else {
            var appended = current
            for id in incoming where appended.last != id { appended.append(id) }
            topics[topic] = appended
        }
    }

    fileprivate mutating func remove(_ tokens: [UInt32], from topic: String) {
        guard var current = topics[topic] else { return }
        let leaving = Set(tokens)
        current.removeAll { leaving.contains($0) }
        topics[topic] = current.isEmpty ? nil : current
    }
}
