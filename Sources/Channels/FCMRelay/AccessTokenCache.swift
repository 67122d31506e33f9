import Foundation
import Registry

/// One access token per relaying project, shared by every delivery: fetched with the JWT-bearer
/// grant, refreshed 3 min 45 s before it expires (as google-auth does), fetched once when many
/// deliveries ask at the same time, and dropped once when FCM answers 401.
actor AccessTokenCache {
    private struct Entry {
        var token: String
        var refreshAt: ContinuousClock.Instant
        var settings: FCMSettings
    }

    /// A token endpoint refused the assertion or answered something that is not a token.
    struct Refused: Error, CustomStringConvertible {
        var description: String
        /// The token endpoint's status, when it answered.
        var status: Int? = nil
    }

    /// A token and its lifetime, as a token endpoint grants them.
    typealias Fetch = @Sendable (FCMSettings) async throws -> (token: String, lifetime: Duration)

    static let refreshMargin: Duration = .seconds(225)
    private let fetch: Fetch
    private var entries: [Int64: Entry] = [:]
    private var fetching: [Int64: Task<Entry, any Error>] = [:]
    /// Tokens fetched so far.
    private(set) var fetches = 0

    init(client: UpstreamClient) {
        fetch = { settings in try await Self.grant(settings, client: client) }
    }

    /// With another way to fetch a token: a test's.
    init(fetch: @escaping Fetch) {
        self.fetch = fetch
    }

    /// The project's access token, fetched when there is none, it is near its expiry, or the
    /// project's key changed.
    func token(for project: Int64, settings: FCMSettings) async throws -> String {
        if let entry = entries[project], entry.settings == settings, entry.refreshAt > .now { return entry.token }
        // A waiter cancelled (the server stops) stops the fetch rather than wait out its timeout.
        if let task = fetching[project] {
            return try await withTaskCancellationHandler { try await task.value.token } onCancel: { task.cancel() }
        }
        let fetch = fetch
        let task = Task {
            let (token, lifetime) = try await fetch(settings)
            // Refreshed ahead of expiry; a short-lived token is used for at most half its life.
            let refreshIn = lifetime > Self.refreshMargin * 2 ? lifetime - Self.refreshMargin : lifetime / 2
            return Entry(token: token, refreshAt: .now + refreshIn, settings: settings)
        }
        fetching[project] = task
        defer { fetching[project] = nil }
        let entry = try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        entries[project] = entry
        fetches += 1
        return entry.token
    }

    /// FCM refused `token`: the next delivery fetches another.
    func drop(project: Int64, token: String) {
        if entries[project]?.token == token { entries[project] = nil }
    }

    /// The JWT-bearer grant at the key file's `token_uri`.
    private static func grant(_ settings: FCMSettings, client: UpstreamClient) async throws
        -> (token: String, lifetime: Duration)
    {
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
            throw Refused(description: "the token endpoint answered \(answer.status)", status: answer.status)
        }
        return (granted.access_token, .seconds(max(1, granted.expires_in ?? 3600)))
    }
}
