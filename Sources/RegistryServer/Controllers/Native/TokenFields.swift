import Foundation
import Registry

/// A token as every native route shows it (`GET /api/tokens/{token}`, the token listing,
/// `tokens:batchUpdate`): its state and times, what it says of its device (an attribute it never
/// said is left out), when it was last seen and whether that is recent enough to count as fresh.
struct TokenFields: Encodable {
    var token: String
    var state: TokenState
    var createdAt: Date
    var updatedAt: Date
    var lastSeenAt: Date
    var fresh: Bool
    var platform: TokenAttributes.Platform?
    var locale: String?
    var timeZone: String?
    var appVersion: String?

    /// - Parameter policy: the project's (`fresh` follows its `staleAfter`).
    init(_ info: TokenInfo, policy: TokenPolicy, now: Date = Date()) {
        token = info.token
        state = info.state
        createdAt = info.createdAt
        updatedAt = info.updatedAt
        lastSeenAt = info.lastSeenAt
        fresh = policy.isFresh(lastSeenAt: info.lastSeenAt, now: now)
        platform = info.attributes.platform
        locale = info.attributes.locale
        timeZone = info.attributes.timeZone
        appVersion = info.attributes.appVersion
    }
}
