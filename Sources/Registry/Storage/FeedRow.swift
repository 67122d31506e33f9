import AudienceEngine

/// An audience change as every store's `audienceChange` table keeps it: the project's row id, the
/// kind as a word, the topic (none for registrations and a reset) and the token ids as
/// `TokenIDList` bytes. Written once here, so that each store's feed only binds and reads columns.
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
        case .reset:
            self.init(project: 0, kind: "reset", topic: nil, tokenIDs: TokenIDList.encode([]))
        }
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
        default: return .reset
        }
    }
}
