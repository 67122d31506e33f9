import ArgumentParser
import Foundation
import Registry

/// The configurable limits of `serve`; FCM's values by default, each also read from the environment.
struct LimitOptions: ParsableArguments {
    @Option(help: "Members per device group (default 20, or $FCM_REGISTRY_GROUP_MEMBERS).")
    var groupMembers: Int?

    @Option(help: "Tokens per batchAdd/batchRemove call (default 1000, or $FCM_REGISTRY_BATCH_TOKENS).")
    var batchTokens: Int?

    @Option(help: "Topics per token (default 2000, or $FCM_REGISTRY_TOPICS_PER_TOKEN).")
    var topicsPerToken: Int?

    @Option(help: "Largest request body in bytes (default 1048576, or $FCM_REGISTRY_BODY_BYTES).")
    var bodyBytes: Int?

    @Option(help: "Accepted messages kept in the message log (default 1000, or $FCM_REGISTRY_MESSAGE_LOG).")
    var messageLog: Int?

    func validate() throws {
        for value in [groupMembers, batchTokens, topicsPerToken, bodyBytes, messageLog].compactMap({ $0 }) where value < 1 {
            throw ValidationError("limits must be positive")
        }
    }

    /// The limits from the options, then the environment, then FCM's defaults.
    var limits: Limits {
        let environment = ProcessInfo.processInfo.environment
        func value(_ option: Int?, _ name: String, _ fallback: Int) -> Int {
            option ?? environment[name].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? fallback
        }
        var limits = Limits()
        limits.membersPerGroup = value(groupMembers, "FCM_REGISTRY_GROUP_MEMBERS", limits.membersPerGroup)
        limits.tokensPerBatch = value(batchTokens, "FCM_REGISTRY_BATCH_TOKENS", limits.tokensPerBatch)
        limits.topicsPerToken = value(topicsPerToken, "FCM_REGISTRY_TOPICS_PER_TOKEN", limits.topicsPerToken)
        limits.requestBodyBytes = value(bodyBytes, "FCM_REGISTRY_BODY_BYTES", limits.requestBodyBytes)
        limits.messageLogSize = value(messageLog, "FCM_REGISTRY_MESSAGE_LOG", limits.messageLogSize)
        return limits
    }
}
