import AudienceEngine
import Conditions
import Foundation

/// How a send went, in no protocol's words; each codec answers it in its own (see the server's
/// outcome table).
public struct SendResult: Sendable {
    /// The id given to the message (also on a dry run, where nothing is recorded).
    public var messageID: String
    /// What refused the whole message; `nil` when it was accepted for at least the recipients
    /// `tokenProblems` does not name.
    public var problem: MessageProblem?
    /// For a token or `registration_ids` target: one entry per named token, in order, `nil` for
    /// an accepted one. Empty for other targets.
    public var tokenProblems: [MessageProblem?]
    /// Tokens the message reached (0 when refused).
    public var recipientCount: Int
    /// A device-group target refused for its content: the members it would have reached (the
    /// legacy protocol lists them as `failed_registration_ids`).
    public var refusedMembers: [String]
    /// Whether the target turned out to be a device group (a notification key).
    public var isDeviceGroup: Bool
    /// A device group sent to through the relay: the members FCM refused (legacy
    /// `failed_registration_ids`, with `success` the others).
    public var failedMembers: [String] = []
    /// A direct send through the relay: the recipients FCM had not answered for when the answer
    /// timeout passed (accepted, still being delivered). An XMPP delivery receipt waits for FCM.
    public var undecided: Set<String> = []
    /// A keyed send's key as written with the message; `nil` when nothing was written (a refusal,
    /// a dry run, a send that reached no one), and then the key was not taken.
    public var idempotency: IdempotencyRecord?
}

/// Where accepted messages go: the message log, or the relay to FCM, which logs them too.
public protocol MessageSink: Sendable {
    /// Whether FCM, not the registry, judges this project's tokens (its relay is on): a send to a
    /// token the registry has never seen goes to FCM all the same.
    func relays(_ project: Project) async throws -> Bool
    /// Takes an accepted message. Returns once it is durably taken; for a direct send through the
    /// relay, once FCM's outcomes are in or the answer timeout passed.
    /// - Returns: what FCM said of a direct send's recipients so far; `.none` otherwise.
    /// - Throws: `MessageProblem.outboxFull` when the relay's outbox is full.
    func accept(_ message: AcceptedMessage) async throws -> DirectOutcomes
    /// The longest `accept` waits for FCM's outcomes of a direct send: how long a keyed send's key
    /// is held in progress, at least.
    var answerWait: Duration { get }
}

extension MessageSink {
    public var answerWait: Duration { .zero }
}

/// What FCM said of a direct send's recipients by the time the sender is answered.
public struct DirectOutcomes: Sendable, Hashable {
    /// The recipients FCM refused, with the problem each protocol answers.
    public var refused: [String: MessageProblem]
    /// The recipients without an outcome yet (the answer timeout passed): accepted, still on their way.
    public var undecided: Set<String>

    public init(refused: [String: MessageProblem] = [:], undecided: Set<String> = []) {
        self.refused = refused
        self.undecided = undecided
    }

    /// No answer from FCM to give: the message log's, or a topic send's.
    public static let none = DirectOutcomes()
}

/// A message that passed every check, with whom it reaches.
public struct AcceptedMessage: Sendable {
    public var id: String
    public var project: Project
    public var via: MessageProtocol
    public var message: Message
    /// Ids of the tokens reached, ascending.
    public var recipients: RoaringBitmap
    /// A direct send through the relay (a token, `registration_ids`, a device group): every
    /// recipient token, each once, the registry's own and those only FCM knows. `nil` otherwise.
    public var directTokens: [String]?
    public var receivedAt: Date
    /// A keyed send's key and answer, which the store writes in the message's transaction; it
    /// throws `IdempotencyKeyTaken`, writing nothing, when the key is already taken.
    public var idempotency: IdempotencyRecord?
    /// The stale tokens a fan-out left out, the project's policy not sending to them.
    public var skippedStale: Int

    public init(
        id: String, project: Project, via: MessageProtocol, message: Message, recipients: RoaringBitmap,
        directTokens: [String]? = nil, receivedAt: Date, idempotency: IdempotencyRecord? = nil, skippedStale: Int = 0
    ) {
        self.idempotency = idempotency
        self.skippedStale = skippedStale
        self.id = id
        self.project = project
        self.via = via
        self.message = message
        self.recipients = recipients
        self.directTokens = directTokens
        self.receivedAt = receivedAt
    }
}

/// The message pipeline: every protocol's codec builds a `Message` and calls `send`.
extension RegistryService {
    /// Validates `message`, resolves whom it reaches, and hands it to the sink unless it is a dry
    /// run. Emulator semantics: a well-formed token the project has never seen is not registered
    /// (`MessageProblem.notRegistered`), so a typo in a test's token does not "succeed"; one
    /// that another project registered belongs to another sender (`.senderIDMismatch`).
    ///
    /// Checks, in order: the target (missing, malformed topic or condition, too many tokens, a
    /// `notification_key` this project did not issue), then the content (data keys, time to live,
    /// payload size), then each recipient.
    ///
    /// With `idempotency`, the key and the answer `idempotency.answer` words are written in the
    /// message's own transaction (see `IdempotencyRecord`); a send that writes no message takes no
    /// key. Check the key first with `idempotencyVerdict`.
    /// - Throws: `IdempotencyKeyTaken` when another request took the key first (nothing was sent).
    public func send(
        _ message: Message, via protocolName: MessageProtocol, in project: Project, idempotency: IdempotentSend? = nil
    ) async throws -> SendResult {
        let id =
            message.options.dryRun
            ? "fake_message_id" : message.isToTopics ? Self.newTopicMessageID() : Self.newMessageID()
        var result = SendResult(
            messageID: id, problem: nil, tokenProblems: [], recipientCount: 0, refusedMembers: [],
            isDeviceGroup: false)
        if let fault = faults.take(token: nil, project: project.rowID) {
            // The project's fault answers every send, as FCM's project quota does.
            let problem = fault.problem(token: nil, toTopics: message.isToTopics)
            result.problem = problem
            if case .registrationIDs(let tokens) = message.target {
                result.tokenProblems = Array(repeating: problem, count: tokens.count)
            }
            return result
        }
        var recipients: RoaringBitmap
        var skippedStale = 0
        // With the relay on, FCM is the judge of a token, not the registry.
        let relaying = try await sink.relays(project)
        var direct: [String]?
        do {
            switch message.target {
            case .topic(let topic):
                guard TopicName.isValid(topic) else {
                    throw MessageProblem.invalidParameters(
                        "topic name must match [a-zA-Z0-9-_.~%]{1,900}", field: "topic")
                }
                try MessageRules.checkContent(message)
                recipients = audience.snapshot(of: project.rowID).members(of: topic).bitmap
            case .condition(let source):
                let snapshot = audience.snapshot(of: project.rowID)
                let dialect = protocolName.conditionDialect
                let condition = try await CostlyWork.run { try MessageRules.condition(source, dialect: dialect) }
                try MessageRules.checkContent(message)
                recipients = await CostlyWork.run { snapshot.evaluate(condition.expression) }
            case .notificationKey(let key):
                guard let group = try await groupID(forNotificationKey: key, in: project) else {
                    throw MessageProblem.invalidParameters(
                        "notification_key is not a key this project issued", field: "notification_key")
                }
                if let sent = try await mirroredGroupSend(message, via: protocolName, key: key, group: group, in: project) {
                    return Self.mirrored(sent, result)
                }
                result.isDeviceGroup = true
                recipients = try await groupRecipients(
                    try await memberIDs(ofGroup: group, in: project), of: message, key: key, in: project, result: &result)
            case .token(let token):
                if let group = try await groupID(forNotificationKey: token, in: project) {
                    if let sent = try await mirroredGroupSend(
                        message, via: protocolName, key: token, group: group, in: project)
                    {
                        return Self.mirrored(sent, result)
                    }
                    result.isDeviceGroup = true
                    recipients = try await groupRecipients(
                        try await memberIDs(ofGroup: group, in: project), of: message, key: token, in: project,
                        result: &result)
                } else {
                    guard !token.isEmpty else { throw MessageProblem.missingRegistration }
                    try MessageRules.checkContent(message)
                    (recipients, result.tokenProblems, direct) = try await tokenRecipients(
                        [token], in: project, relaying: relaying)
                    if let problem = result.tokenProblems[0] { throw problem }
                }
            case .registrationIDs(let tokens):
                guard !tokens.isEmpty else { throw MessageProblem.missingRegistration }
                guard tokens.count <= limits.tokensPerBatch else {
                    throw MessageProblem.invalidParameters(
                        "registration_ids holds at most \(limits.tokensPerBatch) tokens", field: "registration_ids")
                }
                do {
                    try MessageRules.checkContent(message)
                } catch {
                    result.tokenProblems = Array(repeating: error, count: tokens.count)
                    throw error
                }
                (recipients, result.tokenProblems, direct) = try await tokenRecipients(
                    tokens, in: project, relaying: relaying)
            }
            if message.isToTopics || result.isDeviceGroup {
                // A fan-out leaves stale tokens out when the project's policy says so; a named token goes.
                (recipients, skippedStale) = try await skippingStale(recipients, in: project)
                if result.isDeviceGroup, relaying {
                    direct = try await store.tokenValues(ids: Array(recipients.ids), in: project)
                }
            }
            result.recipientCount = direct?.count ?? recipients.count
            // Topic and condition sends are logged even when nobody is subscribed: the sender did send.
            let reachesAnyone = !recipients.isEmpty || !(direct ?? []).isEmpty
            if !message.options.dryRun && (message.isToTopics || reachesAnyone) {
                let outcomes: DirectOutcomes
                let now = Date()
                if let idempotency {
                    // A direct send through the relay is answered once FCM has spoken: until then the
                    // key holds the answer given when FCM says nothing in time.
                    var provisional = result
                    if let direct { provisional.undecided = Set(direct) }
                    result.idempotency = try idempotencyRecord(
                        idempotency, messageID: id, answer: idempotency.answer(provisional), complete: direct == nil,
                        now: now)
                }
                do {
                    outcomes = try await sink.accept(
                        AcceptedMessage(
                            id: id, project: project, via: protocolName, message: message, recipients: recipients,
                            directTokens: direct, receivedAt: now, idempotency: result.idempotency,
                            skippedStale: skippedStale))
                } catch let problem as MessageProblem {
                    // The outbox is full: every recipient of a multicast is answered so.
                    result.tokenProblems = result.tokenProblems.map { $0 ?? problem }
                    result.idempotency = nil
                    throw problem
                }
                result.undecided = outcomes.undecided
                try Self.apply(outcomes.refused, to: &result, of: message)
            }
        } catch let problem as MessageProblem {
            result.problem = problem
            result.recipientCount = 0
            return result
        }
        return result
    }

    /// The answer to a device-group send handed to Google (`mirroredGroupSend`): Google's verdict,
    /// counted over the members known here (Google does not say how many it reached).
    private static func mirrored(_ sent: (problem: MessageProblem?, knownMembers: Int), _ result: SendResult)
        -> SendResult
    {
        var result = result
        result.isDeviceGroup = true
        result.problem = sent.problem
        result.recipientCount = sent.problem == nil ? max(1, sent.knownMembers) : 0
        return result
    }

    /// Puts FCM's refusals of a direct send through the relay where each protocol answers them: a
    /// token's problem, a multicast's results, a device group's failed members.
    private static func apply(_ refused: [String: MessageProblem], to result: inout SendResult, of message: Message)
        throws(MessageProblem)
    {
        guard !refused.isEmpty else { return }
        switch message.target {
        case .registrationIDs(let tokens):
            for (index, token) in tokens.enumerated() where result.tokenProblems[index] == nil {
                result.tokenProblems[index] = refused[token]
            }
        case .token(let token) where !result.isDeviceGroup:
            if let problem = refused[token] {
                result.tokenProblems = [problem]
                throw problem
            }
        case .token, .notificationKey:
            result.failedMembers = refused.keys.sorted()
            result.recipientCount -= refused.count
        case .topic, .condition:
            break
        }
    }

    /// The members of a device group whose content passed; on a content problem, the members are
    /// listed in `result` and the problem thrown.
    private func groupRecipients(
        _ members: [UInt32], of message: Message, key: String, in project: Project, result: inout SendResult
    ) async throws -> RoaringBitmap {
        // A key of a group deleted with its last member reaches no one.
        guard !members.isEmpty else { throw MessageProblem.notRegistered(key) }
        do {
            try MessageRules.checkContent(message)
        } catch {
            result.refusedMembers = try await store.tokenValues(ids: members, in: project)
            throw error
        }
        return RoaringBitmap(sortedIDs: members)
    }

    /// Each named token's problem (`nil` when it may receive) and the ids of those that may; with
    /// the relay on, also every token that may receive, each once, known to the registry or not.
    private func tokenRecipients(_ tokens: [String], in project: Project, relaying: Bool) async throws -> (
        RoaringBitmap, [MessageProblem?], [String]?
    ) {
        // One lookup for the whole multicast, not one per token; a second only for those missing.
        let wellFormed = tokens.filter(RegistrationToken.isWellFormed)
        let ids = try await store.tokenIDs(wellFormed, in: project)
        let missing = wellFormed.filter { ids[$0] == nil }
        let otherSenders = missing.isEmpty ? [] : try await store.tokensOfOtherSenders(missing, notIn: project)
        var reached = RoaringBitmap()
        var problems: [MessageProblem?] = []
        problems.reserveCapacity(tokens.count)
        var direct: [String] = []
        var seen: Set<String> = []
        let faulty = faults.hasTokenFaults(in: project.rowID)
        for token in tokens {
            if faulty, let fault = faults.take(token: token, project: project.rowID) {
                problems.append(fault.problem(token: token, toTopics: false))
            } else if !RegistrationToken.isWellFormed(token) {
                problems.append(.invalidRegistration(token))
            } else if relaying {
                if let id = ids[token] { reached.insert(id) }
                if seen.insert(token).inserted { direct.append(token) }
                problems.append(nil)
            } else if let id = ids[token] {
                reached.insert(id)
                problems.append(nil)
            } else if otherSenders.contains(token) {
                // As FCM: a token is bound to the sender that registered it.
                problems.append(.senderIDMismatch(token))
            } else {
                problems.append(.notRegistered(token))
            }
        }
        return (reached, problems, relaying ? direct : nil)
    }

    /// The sorted member ids of a group a notification key named. A key of a group that no longer
    /// exists names no one: `[]`.
    private func memberIDs(ofGroup group: Int64, in project: Project) async throws -> [UInt32] {
        try await store.memberIDs(ofGroup: group, named: nil, in: project) ?? []
    }


    /// A topic or condition message's id: a positive decimal number, as FCM's legacy answer
    /// `{"message_id":7349102318409238}` gives it, so that the answer names the logged entry.
    /// Below 2^53, as FCM's are: a JavaScript client reads the number exactly.
    public static func newTopicMessageID() -> String {
        String(Int64.random(in: 1_000_000_000_000_000...(1 << 53 - 1)))
    }

    /// A message id shaped like FCM's legacy ones: `0:1416811810537717%31bd1c9631bd1c96`.
    public static func newMessageID() -> String {
        let micros = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let random = UInt64.random(in: .min ... .max)
        return "0:\(micros)%\(String(random, radix: 16))"
    }
}
