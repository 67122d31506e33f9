import Foundation
import Registry

/// One access token per relaying project, shared by every delivery: fetched with the JWT-bearer
/// grant, refreshed 3 min 45 s before it expires (as google-auth does), fetched once when many
/// deliveries ask at the same time, and dropped once when FCM answers 401.
actor AccessTokenCache {
    private struct Entry {
        var token: String
        var refreshAt: ContinuousClock.Instant
        var settings: RelaySettings
    }

    /// A token endpoint refused the assertion or answered something that is not a token.
    struct Refused: Error, CustomStringConvertible {
        var description: String
    }

    static let refreshMargin: Duration = .seconds(225)
    private let client: UpstreamClient
    private var entries: [Int64: Entry] = [:]
    private var fetching: [Int64: Task<Entry, any Error>] = [:]
    /// Tokens fetched, for tests and metrics.
    private(set) var fetches = 0

    init(client: UpstreamClient) {
        self.client = client
    }

    /// The project's access token, fetched when there is none, it is near its expiry, or the
    /// project's key changed.
    func token(for project: Int64, settings: RelaySettings) async throws -> String {
        if let entry = entries[project], entry.settings == settings, entry.refreshAt > .now { return entry.token }
        if let task = fetching[project] { return try await task.value.token }
        let client = client
        let task = Task { try await Self.fetch(settings, client: client) }
        fetching[project] = task
        defer { fetching[project] = nil }
        let entry = try await task.value
        entries[project] = entry
        fetches += 1
        return entry.token
    }

    /// FCM refused `token`: the next delivery fetches another.
    func drop(project: Int64, token: String) {
        if entries[project]?.token == token { entries[project] = nil }
    }

    private static func fetch(_ settings: RelaySettings, client: UpstreamClient) async throws -> Entry {
        let assertion = try settings.assertion()
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let answer = try await client.post(
            settings.tokenURI, contentType: "application/x-www-form-urlencoded", authorization: nil,
            body: Array(form.utf8))
        struct Granted: Decodable {
            var access_token: String
            var expires_in: Int?
        }
        guard answer.status == 200, let granted = try? JSONDecoder().decode(Granted.self, from: Data(answer.body)),
            !granted.access_token.isEmpty, granted.access_token.utf8.count <= 4096
        else {
            throw Refused(description: "the token endpoint answered \(answer.status)")
        }
        let lifetime = Duration.seconds(granted.expires_in ?? 3600)
        let refreshIn = max(lifetime - refreshMargin, min(lifetime, .seconds(30)))
        return Entry(token: granted.access_token, refreshAt: .now + refreshIn, settings: settings)
    }
}
