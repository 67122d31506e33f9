import AudienceEngine
import Foundation

/// An audience change as every store's `audienceChange` table keeps it: the project's row id, the
/// kind as a word, the topic (none for registrations and a reset) and the token ids as
/// `TokenIDList` bytes. Entries without a topic use its column for what else they say: a
/// `described` entry's attributes (a JSON array, one object per token), a `seen` entry's day. Written once here, so that each store's feed only binds and reads columns.
public struct FeedRow: Sendable, Equatable {
    public var project: Int64
    public var kind: String
    public var topic: String?
    public var tokenIDs: [UInt8]

    public init(project: Int64, kind: String, topic: String?, tokenIDs: [UInt8]) {
        self.project = project
        self.kind = kind
        self.topic = topic
        self.tokenIDs = tokenIDs
    }

    /// The row of `change`.
    public init(_ change: AudienceChange) {
        switch change {
        case .subscribed(let project, let topic, let tokens):
            self.init(project: project, kind: "subscribed", topic: topic, tokenIDs: TokenIDList.encode(tokens))
        case .unsubscribed(let project, let topic, let tokens):
            self.init(project: project, kind: "unsubscribed", topic: topic, tokenIDs: TokenIDList.encode(tokens))
        case .registered(let project, let tokens):
            self.init(project: project, kind: "registered", topic: nil, tokenIDs: TokenIDList.encode(tokens))
        case .unregistered(let project, let tokens):
            self.init(project: project, kind: "unregistered", topic: nil, tokenIDs: TokenIDList.encode(tokens))
        case .described(let project, let tokens, let values):
            let wire = values.map {
                DescribedWire(p: $0.platform, l: $0.locale, z: $0.timeZone, v: $0.appVersion, d: $0.seenDay)
            }
            let json = (try? JSONEncoder().encode(wire)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
            self.init(project: project, kind: "described", topic: json, tokenIDs: TokenIDList.encode(tokens))
        case .seen(let project, let tokens, let day):
            self.init(project: project, kind: "seen", topic: String(day), tokenIDs: TokenIDList.encode(tokens))
        case .reset:
            self.init(project: 0, kind: "reset", topic: nil, tokenIDs: TokenIDList.encode([]))
        }
    }

    /// A token's attributes in a `described` entry, by one-letter keys (an entry lists up to a
    /// thousand tokens).
    private struct DescribedWire: Codable {
        var p: String?
        var l: String?
        var z: String?
        var v: String?
        var d: Int32
    }

    /// The change this row records; a kind this version does not know reads as a reset, which
    /// makes a follower reload rather than miss a change.
    public var change: AudienceChange {
        let ids = TokenIDList.decode(tokenIDs)
        switch kind {
        case "subscribed": return .subscribed(project: project, topic: topic ?? "", tokens: ids)
        case "unsubscribed": return .unsubscribed(project: project, topic: topic ?? "", tokens: ids)
        case "registered": return .registered(project: project, tokens: ids)
        case "unregistered": return .unregistered(project: project, tokens: ids)
        case "described":
            guard let json = topic,
                let wire = try? JSONDecoder().decode([DescribedWire].self, from: Data(json.utf8)),
                wire.count == ids.count
            else { return .reset }
            return .described(
                project: project, tokens: ids,
                values: wire.map {
                    IndexedAttributes(platform: $0.p, locale: $0.l, timeZone: $0.z, appVersion: $0.v, seenDay: $0.d)
                })
        case "seen":
            guard let day = topic.flatMap({ Int32($0) }) else { return .reset }
            return .seen(project: project, tokens: ids, day: day)
        default: return .reset
        }
    }
}
