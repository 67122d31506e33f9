import ArgumentParser
import FCMWire
import Foundation
import Registry

extension ProjectCommand {
    /// `project tokens`: the project's token policy, shown, or changed by the options given.
    struct Tokens: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show or change when the project's tokens count as stale and when they expire.",
            discussion: """
                A token is stale once its app has not checked in for --stale-after (default 30d, FCM's guidance); \
                with --expire-after, one not seen for that long is unregistered as an FCM UNREGISTERED answer \
                unregisters it (it leaves its topics and groups, webhooks hear token.unregistered with reason \
                EXPIRED) by a sweep that runs within a minute and then hourly. --send-to-stale false makes \
                fan-outs skip stale tokens. Durations are a whole number and a unit: s, m, h or d (1h to 3650d); \
                --expire-after off turns expiry off. Options left out keep their value; with none, the policy is \
                printed. See "Freshness" in docs/http-api.md.
                """)

        @OptionGroup var project: ProjectOption
        @Option(help: "How long after it was last seen a token turns stale, e.g. 30d.") var staleAfter: String?
        @Option(help: "How long after it was last seen a token is unregistered, e.g. 270d; off for never.")
        var expireAfter: String?
        @Option(help: "Whether fan-outs reach stale tokens: true or false.") var sendToStale: String?
        @OptionGroup var database: DatabaseOptions

        /// What it prints: the policy as `GET /api/project` shows it.
        struct Shown: Encodable {
            var project_id: String
            var tokenPolicy: TokenPolicyCodec.Shown
        }

        func run() async throws {
            var change = TokenPolicyChange()
            if let staleAfter {
                guard let duration = Self.duration(staleAfter) else {
                    throw ValidationError(CommandWording.staleAfterDuration)
                }
                change.staleAfter = duration
            }
            if let expireAfter {
                if expireAfter == "off" {
                    change.expireAfter = .some(nil)
                } else {
                    guard let duration = Self.duration(expireAfter) else {
                        throw ValidationError(CommandWording.expireAfterDuration)
                    }
                    change.expireAfter = .some(duration)
                }
            }
            if let sendToStale {
                guard let value = Bool(sendToStale) else { throw ValidationError(CommandWording.sendToStaleBoolean) }
                change.sendToStale = value
            }
            let registry = try await database.openRegistry()
            let chosen = try await project.resolve(in: registry)
            let policy =
                change.isEmpty
                ? try await registry.tokenPolicy(of: chosen) : try await registry.setTokenPolicy(change, for: chosen)
            try printJSON(Shown(project_id: chosen.projectId, tokenPolicy: TokenPolicyCodec.Shown(policy)))
        }

        /// `3600s`, `90m`, `12h`, `270d`: a positive whole number and a unit; the range is the policy's rule.
        static func duration(_ text: String) -> Duration? {
            let units: [(String, Int64)] = [("s", 1), ("m", 60), ("h", 3_600), ("d", 86_400)]
            for (unit, seconds) in units where text.hasSuffix(unit) {
                guard let number = Int64(text.dropLast()), number > 0, number <= 1_000_000_000 else { return nil }
                return .seconds(number * seconds)
            }
            return nil
        }
    }
}
