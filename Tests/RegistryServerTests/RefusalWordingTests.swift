import FCMWire
import Registry
@testable import RegistryServer
import Testing

/// The command line words a refusal from `RefusalWording` (in `FCMWire`, which it imports instead
/// of this target); the native API's envelope must say the very same words.
@Suite("Refusal wording")
struct RefusalWordingTests {
    static let refusals: [RegistryError] = [
        .groupNameTaken, .noValidRegistrationIds, .groupNotFound, .groupNameMismatch, .undecryptableKey,
        .groupFull(limit: 20), .invalidGroupName("a group name is 1 to 64 characters"), .invalidTopicName,
        .malformedToken, .tokenNotFound, .tooManyTopics(limit: 2000), .subscriptionExists, .subscriptionNotFound,
        .invalidProject("sender id must be 1 to 20 digits"), .projectExists("project test-app exists"),
        .projectNotFound("other"), .serverKeyNotFound, .invalidServerKey("a key needs at least one scope", field: "scopes"),
        .lastAdminKey, .serviceAccountNotFound, .rekeyToSameToken, .messageNotFound,
        .messageFinished, .invalidPageToken, .tooManyFaults(limit: 1000), .storeBusy, .webhookNotFound, .tooManyWebhooks(limit: 16),
        .invalidWebhookURL("a webhook URL must be https"), .invalidWebhookEvents("events must not be empty"),
        .invalidTokenAttribute(.locale), .invalidTokenAttribute(.lastSeenCleared),
    ]

    @Test("The native API says each refusal in the table's words, as the command line does", arguments: refusals)
    func nativeSaysTheTable(_ refusal: RegistryError) throws {
        let body = try JSONBody.object(ErrorEnvelope.registryError(refusal, .native).body)
        guard case .object(let error)? = body["error"], case .string(let message)? = error["message"] else {
            Issue.record("no error.message in \(body)")
            return
        }
        #expect(message == refusal.wording.message)
    }
}
