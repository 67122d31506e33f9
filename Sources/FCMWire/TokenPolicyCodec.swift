import Foundation
import Registry

/// A project's token policy as the native API writes it (`GET /api/project`) and reads a change
/// to it (`PATCH /api/project`): durations as Google writes TTLs (`"2592000s"`), `expireAfter`
/// `null` for no expiry.
public enum TokenPolicyCodec {
    /// The policy as `GET /api/project` shows it.
    public struct Shown: Encodable, Sendable, Hashable {
        public var staleAfter: String
        /// `null` (written, never left out) while tokens never expire.
        public var expireAfter: String?
        public var sendToStale: Bool

        public init(_ policy: TokenPolicy) {
            staleAfter = "\(policy.staleAfter.components.seconds)s"
            expireAfter = policy.expireAfter.map { "\($0.components.seconds)s" }
            sendToStale = policy.sendToStale
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(staleAfter, forKey: .staleAfter)
            try container.encode(expireAfter, forKey: .expireAfter)
            try container.encode(sendToStale, forKey: .sendToStale)
        }

        private enum CodingKeys: String, CodingKey { case staleAfter, expireAfter, sendToStale }
    }

    static let keys: Set<String> = ["staleAfter", "expireAfter", "sendToStale"]

    /// The change `json` (the value of `tokenPolicy`) asks for: a key left out keeps its setting,
    /// `"expireAfter": null` turns expiry off.
    /// - Throws: `RegistryError.invalidTokenPolicy` naming the key at fault.
    public static func change(from json: JSONValue?) throws -> TokenPolicyChange {
        guard let object = json?.object else { throw RegistryError.invalidTokenPolicy(.notObject) }
        guard object.keys.allSatisfy(keys.contains) else { throw RegistryError.invalidTokenPolicy(.unknownKey) }
        var change = TokenPolicyChange()
        if let value = object["staleAfter"] {
            change.staleAfter = try duration(value, .staleAfterNotDuration)
        }
        switch object["expireAfter"] {
        case nil: break
        case .null: change.expireAfter = .some(nil)
        case let value?: change.expireAfter = .some(try duration(value, .expireAfterNotDuration))
        }
        switch object["sendToStale"] {
        case nil: break
        case .bool(let value): change.sendToStale = value
        default: throw RegistryError.invalidTokenPolicy(.sendToStaleNotBoolean)
        }
        guard !change.isEmpty else { throw RegistryError.invalidTokenPolicy(.empty) }
        return change
    }

    /// A Google duration of whole seconds (`"2592000s"`); `TokenPolicy.validate` checks its range.
    private static func duration(_ json: JSONValue, _ problem: TokenPolicyProblem) throws -> Duration {
        guard let text = json.string, text.utf8.count <= 32, let seconds = GoogleDuration.seconds(text),
            seconds.rounded() == seconds, seconds <= 1e12
        else { throw RegistryError.invalidTokenPolicy(problem) }
        return .seconds(Int64(seconds))
    }
}
