import Foundation
import Registry

/// A downstream stanza's JSON through the pipeline, answered as an ack or a nack (table 4 of the
/// XMPP reference): the legacy codec reads it, `RegistryService.send` decides. Here, below both
/// front ends, because the XMPP server answers with it and the HTTP API validates with it.
public enum XMPPDownstream {
    public struct Answer {
        /// The ack or nack body.
        public var json: [String: Any]
        public var accepted: Bool
        /// The message as read, when it was.
        public var message: Message?
        /// The id the pipeline gave an accepted message (none on a dry run).
        public var loggedID: String?
        /// Whether the target turned out to be a device group.
        public var isDeviceGroup = false
        /// Through the relay: FCM had not taken the message when the ack was given, so no
        /// receipt can say it reached the device.
        public var awaitingFCM = false
    }

    /// The answer to one downstream message. With `dryRun` nothing is recorded whatever the
    /// message says (`POST /api/messages:validate`).
    public static func answer(to fields: [String: JSONValue], registry: RegistryService, project: Project, dryRun: Bool)
        async throws -> Answer
    {
        let messageID = try? LegacyCodec.string(fields, "message_id")
        let to = try? LegacyCodec.string(fields, "to")
        var answer = Answer(json: ["message_type": "ack"], accepted: false)
        if let messageID { answer.json["message_id"] = messageID }
        if let to { answer.json["from"] = to }
        func nack(_ code: String, _ description: String) -> Answer {
            answer.json = Self.nack(messageID, to: to, code, description)
            return answer
        }
        guard messageID != nil else { return nack("INVALID_JSON", "message_id is required") }
        if let type = try? LegacyCodec.string(fields, "message_type") {
            // An app server's ack of an upstream message: to, message_id and message_type "ack" only.
            if type != "ack" || to == nil {
                return nack("BAD_ACK", "an ack has message_type \"ack\", to and message_id")
            }
            answer.accepted = true
            return answer
        }
        var fields = fields
        // An early CCS example writes time_to_live as a string of digits.
        if case .string(let text)? = fields["time_to_live"], let seconds = Double(text), text.allSatisfy(\.isNumber) {
            fields["time_to_live"] = .number(seconds)
        }
        var message: Message
        do {
            message = try LegacyCodec.message(json: fields)
        } catch {
            return nack(error.wording.xmpp, error.wording.description)
        }
        answer.message = message
        if case .registrationIDs(let tokens) = message.target, !tokens.isEmpty {
            return nack("INVALID_JSON", "registration_ids is not part of the XMPP protocol: send one message per token")
        }
        if dryRun { message.options.dryRun = true }
        let result = try await registry.send(message, via: .xmpp, in: project)
        answer.isDeviceGroup = result.isDeviceGroup
        if let problem = result.tokenProblems.first ?? nil ?? result.problem {
            return nack(problem.wording.xmpp, problem.wording.description)
        }
        answer.accepted = true
        answer.awaitingFCM = !result.undecided.isEmpty
        if !message.options.dryRun { answer.loggedID = result.messageID }
        return answer
    }

    /// A nack's body (table 4): always with `error_description`, which some clients read unchecked.
    public static func nack(_ messageID: String?, to: String?, _ code: String, _ description: String) -> [String: Any] {
        var body: [String: Any] = ["message_type": "nack", "error": code, "error_description": description]
        if let messageID { body["message_id"] = messageID }
        if let to { body["from"] = to }
        return body
    }
}
