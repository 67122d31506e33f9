import Crypto
import Foundation

// MARK: - The key and the request

/// A client's `Idempotency-Key`, as the IETF httpapi draft and Stripe define it: 1–255 printable
/// ASCII characters, scoped to the project.
///
/// The draft writes the value as a structured-field string (`"8e03978e-…"`, in double quotes);
/// Stripe's clients send it bare. Both are read, and name the same key: the quotes are not part
/// of it.
public struct IdempotencyKey: Sendable, Hashable, CustomStringConvertible {
    public static let maximumLength = 255
    public let value: String

    /// Reads a header's value.
    /// - Throws: `IdempotencyKeyInvalid` when it is empty, longer than 255 characters, or holds a
    ///   character outside printable ASCII.
    public init(header: String) throws(IdempotencyKeyInvalid) {
        var bytes = Array(header.utf8)
        if bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") {
            bytes = try Self.unquoted(bytes.dropFirst().dropLast())
        }
        guard (1...Self.maximumLength).contains(bytes.count), bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw IdempotencyKeyInvalid()
        }
        value = String(decoding: bytes, as: UTF8.self)
    }

    public var description: String { value }

    /// A structured-field string's inside: `\"` and `\\` are its only escapes, and a bare quote ends it.
    private static func unquoted(_ inner: ArraySlice<UInt8>) throws(IdempotencyKeyInvalid) -> [UInt8] {
        var out: [UInt8] = []
        var escaped = false
        for byte in inner {
            if escaped {
                guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { throw IdempotencyKeyInvalid() }
                out.append(byte)
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: "\"") {
                throw IdempotencyKeyInvalid()
            } else {
                out.append(byte)
            }
        }
        guard !escaped else { throw IdempotencyKeyInvalid() }
        return out
    }
}

/// An `Idempotency-Key` header that is not 1–255 printable ASCII characters (or appears twice).
public struct IdempotencyKeyInvalid: Error, Sendable, Hashable {
    public static let message = "Idempotency-Key must be 1 to 255 printable ASCII characters, given once"
    public init() {}
}

/// A send that carries a key: the key, and what tells this request from another one.
public struct IdempotentRequest: Sendable, Hashable {
    public var key: IdempotencyKey
    /// SHA-256, in hex, of the route and the body in a canonical form: the same request written
    /// with other spacing or another key order has the same fingerprint.
    public var fingerprint: String

    /// - Parameters:
    ///   - route: the method and path the request came to (`POST /fcm/send`), and how its body is
    ///     read when a route takes more than one form.
    ///   - canonicalBody: the body as the route read it, in a form that does not depend on spacing or key order.
    public init(key: IdempotencyKey, route: String, canonicalBody: [UInt8]) {
        self.key = key
        var hash = SHA256()
        hash.update(data: Array(route.utf8))
        hash.update(data: [0x0A])
        hash.update(data: canonicalBody)
        fingerprint = hash.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// A JSON object's canonical form: keys sorted, no spacing, numbers as `JSONValue` reads them.
    public static func canonical(_ object: [String: JSONValue]) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(object)) ?? Data())
    }
}

// MARK: - The answer

/// An answer as the server gave it, to be given again byte for byte: the status, the headers
/// that matter (`Content-Type`, `Retry-After`), the body.
public struct StoredAnswer: Sendable, Hashable {
    /// The largest body kept: a multicast of 1000 tokens answers in about 60 KiB.
    public static let maximumBodyBytes = 256 << 10

    public var status: Int
    /// Name and value, in order.
    public var headers: [[String]]
    public var body: [UInt8]

    public init(status: Int, headers: [[String]], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The headers as the store keeps them: a JSON array of `[name, value]` pairs.
    public var headersJSON: String {
        (try? JSONEncoder().encode(headers)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    /// The headers from `headersJSON`; none when the text is not what it wrote.
    public static func headers(fromJSON text: String) -> [[String]] {
        (try? JSONDecoder().decode([[String]].self, from: Data(text.utf8))) ?? []
    }
}

/// What a front end gives `RegistryService.send` for a keyed request: the request, and how it
/// words a result, so the answer is kept in the same transaction as the message.
public struct IdempotentSend: Sendable {
    public var request: IdempotentRequest
    /// The answer the front end gives for a result (errors included, already worded).
    public var answer: @Sendable (SendResult) -> StoredAnswer

    public init(request: IdempotentRequest, answer: @escaping @Sendable (SendResult) -> StoredAnswer) {
        self.request = request
        self.answer = answer
    }
}

/// A key's row: what a store writes with a message (the key, the request's fingerprint and the
/// answer), and reads back for a later request with the key.
///
/// A send whose answer waits for FCM (a direct send through the relay) is written `complete:
/// false` with the answer it would give if FCM said nothing in time (every recipient accepted,
/// on its way), held by the sending server until `lockedUntil`. Its sender replaces it with the
/// real answer; if that server dies first, the key answers with what was written once the hold
/// has passed, and never stays taken for nothing.
public struct IdempotencyRecord: Sendable {
    /// Expired keys a write deletes, at most, as it takes a key: the table's clean-up costs each
    /// keyed send a bounded amount of work, and no one a scan.
    public static let purgeBatch = 16

    public var key: String
    public var fingerprint: String
    /// The logged message's id, which the answer names.
    public var messageID: String
    public var answer: StoredAnswer
    public var complete: Bool
    /// Epoch milliseconds.
    public var createdAt: Int64
    public var lockedUntil: Int64
    public var expiresAt: Int64

    public init(
        key: String, fingerprint: String, messageID: String, answer: StoredAnswer, complete: Bool, createdAt: Int64,
        lockedUntil: Int64, expiresAt: Int64
    ) {
        (self.key, self.fingerprint, self.messageID, self.answer) = (key, fingerprint, messageID, answer)
        (self.complete, self.createdAt, self.lockedUntil, self.expiresAt) = (
            complete, createdAt, lockedUntil, expiresAt
        )
    }
}

/// The message's transaction found its key taken (by a request that committed first, on this
/// server or another): nothing was written.
public struct IdempotencyKeyTaken: Error, Sendable {
    public init() {}
}

/// A keyed send's answer would be larger than `StoredAnswer.maximumBodyBytes`: nothing was sent.
public struct IdempotentAnswerTooLarge: Error, Sendable {
    public init() {}
}

/// What to do with a keyed request.
public enum IdempotencyVerdict: Sendable {
    /// The key is free: run the request.
    case new
    /// The same request was answered: give its answer again.
    case replay(StoredAnswer)
    /// The same request is still being answered (a direct send waits for FCM): 409, try again shortly.
    case inProgress
    /// The key was used for another request: 422.
    case mismatch
}

/// Where keys are kept. A key is written only in the transaction of its message (by the stores'
/// `MessageLogStore.appendMessage` and `OutboxDriver.insertJob`, from `AcceptedMessage.idempotency`):
/// never a key without its message, never a keyed message without its key.
public protocol IdempotencyStore: Sendable {
    /// The project's key, unless it expired by `now` (epoch milliseconds).
    func idempotencyKey(_ key: String, in project: Int64, now: Int64) async throws -> IdempotencyRecord?
    /// Replaces the answer of an incomplete key written for `messageID` and marks it complete.
    /// - Returns: `false` when there is no such incomplete key (nothing written).
    func completeIdempotencyKey(_ key: String, in project: Int64, messageID: String, answer: StoredAnswer)
        async throws -> Bool
}

// MARK: - The rules

extension RegistryService {
    /// What a keyed request gets: run, the stored answer again, 409 or 422.
    public func idempotencyVerdict(_ request: IdempotentRequest, in project: Project, now: Date = Date()) async throws
        -> IdempotencyVerdict
    {
        let now = EpochMilliseconds.milliseconds(now)
        guard let stored = try await idempotency.idempotencyKey(request.key.value, in: project.rowID, now: now) else {
            return .new
        }
        // Another request under the key is refused whatever the state of the first, as Stripe does.
        guard stored.fingerprint == request.fingerprint else { return .mismatch }
        // Held by a live sender; once the hold passes (the sender died), what was written answers.
        if !stored.complete && stored.lockedUntil > now { return .inProgress }
        return .replay(stored.answer)
    }

    /// Gives a keyed direct send its real answer once FCM's outcomes are in.
    /// - Returns: the answer the key holds from now on: `answer`, or, when the key no longer
    ///   waits for it (its hold passed and it expired), what it holds.
    public func completeIdempotentSend(_ record: IdempotencyRecord, in project: Project, answer: StoredAnswer)
        async throws -> StoredAnswer
    {
        guard answer.body.count <= StoredAnswer.maximumBodyBytes else { return record.answer }
        _ = try await idempotency.completeIdempotencyKey(
            record.key, in: project.rowID, messageID: record.messageID, answer: answer)
        return answer
    }

    /// The row to write with an accepted message, holding `answer`.
    func idempotencyRecord(
        _ send: IdempotentSend, messageID: String, answer: StoredAnswer, complete: Bool, now: Date
    ) throws -> IdempotencyRecord {
        guard answer.body.count <= StoredAnswer.maximumBodyBytes else { throw IdempotentAnswerTooLarge() }
        let created = EpochMilliseconds.milliseconds(now)
        // The hold outlasts the longest wait for FCM, with room for the answer to be written.
        let hold = sink.answerWait + .seconds(30)
        return IdempotencyRecord(
            key: send.request.key.value, fingerprint: send.request.fingerprint, messageID: messageID, answer: answer,
            complete: complete, createdAt: created,
            lockedUntil: complete ? created : created + EpochMilliseconds.milliseconds(hold),
            expiresAt: created + EpochMilliseconds.milliseconds(limits.idempotencyRetention))
    }
}
