import Conditions
import Foundation

/// How one named recipient of a message fares.
public enum RecipientStatus: Sendable, Hashable {
    case accepted
    case invalidRegistration
    case notRegistered
}

/// Resolving a message's recipients. The service validates, resolves and records; it never delivers.
extension Registry {
    /// One status per token, in order: malformed, reported dead, or accepted (unknown well-formed
    /// tokens are accepted: FCM would try them).
    public func recipientStatuses(_ tokens: [String], in project: Project) async throws -> [RecipientStatus] {
        var statuses: [RecipientStatus] = []
        statuses.reserveCapacity(tokens.count)
        for token in tokens {
            if !RegistrationToken.isWellFormed(token) {
                statuses.append(.invalidRegistration)
            } else if try await store.token(token, in: project)?.state == .unregistered {
                statuses.append(.notRegistered)
            } else {
                statuses.append(.accepted)
            }
        }
        return statuses
    }

    /// The sorted ids of the tokens subscribed to `topic`.
    public func recipientIDs(topic: String, in project: Project) -> [UInt32] {
        store.audience.snapshot(of: project.rowID).members(of: topic)
    }

    /// The sorted ids of the tokens `condition` reaches.
    public func recipientIDs(condition: Condition, in project: Project) -> [UInt32] {
        store.audience.snapshot(of: project.rowID).evaluate(condition.expression).ids(after: nil, limit: .max)
    }

    /// The group a string names if it is a notification key this project issued: its name and member ids.
    /// `nil` when the string is not such a key (it may then be an old-style registration token).
    /// - Throws: `.groupNotFound` for a key of a group that no longer exists.
    public func group(forNotificationKey key: String, in project: Project) async throws -> (
        id: Int64, members: [UInt32]
    )? {
        guard let id = try? keys.groupID(from: key, in: project) else { return nil }
        guard let members = try await store.memberIDs(ofGroup: id, named: nil, in: project) else {
            throw RegistryError.groupNotFound
        }
        return (id, members)
    }

    /// The values of token ids, for responses that list them.
    public func tokenValues(_ ids: [UInt32], in project: Project) async throws -> [String] {
        try await store.tokenValues(ids: ids, in: project)
    }

    /// A message id shaped like FCM's legacy ones: `0:1416811810537717%31bd1c9631bd1c96`.
    public static func newMessageID() -> String {
        let micros = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let random = UInt64.random(in: .min ... .max)
        return "0:\(micros)%\(String(random, radix: 16))"
    }
}
