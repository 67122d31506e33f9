import FCMWire
import Foundation
import HTTPTypes
import Hummingbird
import Registry

/// `Idempotency-Key` on the send routes (IETF httpapi draft, Stripe's semantics): the HTTP side of
/// the rules in `Registry/Idempotency.swift`.
///
/// A send route reads the key, then the body (a body that is not JSON is refused as today), then
/// asks for the verdict: the stored answer again with `Idempotent-Replayed: true`, 422 for
/// another request under the key, 409 with `Retry-After: 1` while the first is being answered.
/// A new request runs as usual, and its answer is written with its message. A request refused
/// before a message is written (its checks, a dry run, no recipient) takes no key, as Stripe
/// keeps no result for a request that failed validation: sent again, it is checked again.
enum IdempotentSends {
    static let keyHeader = HTTPField.Name("Idempotency-Key")!
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!

    /// How a route words a send's result: its answer, or the refusal it throws (an `APIError`).
    typealias Wording = @Sendable (SendResult) throws -> StoredAnswer

    /// The request's key; `nil` without the header.
    /// - Throws: a 400 in the family's envelope for a key that is not 1–255 printable ASCII
    ///   characters, or a header given twice.
    static func key(of request: Request, family: APIFamily) throws -> IdempotencyKey? {
        let values = request.headers[values: keyHeader]
        guard !values.isEmpty else { return nil }
        do {
            guard values.count == 1 else { throw IdempotencyKeyInvalid() }
            return try IdempotencyKey(header: values[0])
        } catch {
            throw ErrorEnvelope.badRequest(family, IdempotencyKeyInvalid.message, field: "Idempotency-Key")
        }
    }

    /// Answers a send under its key, or as usual without one.
    /// - Parameters:
    ///   - request: the key and the request's fingerprint; `nil` without a key.
    ///   - send: checks and sends the message, with the `IdempotentSend` to give
    ///     `RegistryService.send` (made by `keyed`), and says how its result is worded.
    static func answer(
        _ request: IdempotentRequest?, family: APIFamily, project: Project, registry: RegistryService,
        send: (IdempotentRequest?) async throws -> (SendResult, Wording)
    ) async throws -> Response {
        guard let request else {
            let (result, wording) = try await send(nil)
            return try wording(result).response
        }
        if let early = try await verdict(request, family: family, project: project, registry: registry) {
            return early
        }
        let result: SendResult
        let wording: Wording
        do {
            (result, wording) = try await send(request)
        } catch is IdempotencyKeyTaken {
            // Another request (on this server or another) took the key between the check and the write.
            return try await verdict(request, family: family, project: project, registry: registry)
                ?? inProgress(family).response
        } catch is IdempotentAnswerTooLarge {
            throw ErrorEnvelope.badRequest(
                family,
                "the answer to this request is larger than an Idempotency-Key keeps (\(StoredAnswer.maximumBodyBytes >> 10) KiB): nothing was sent; send it in smaller batches",
                field: "Idempotency-Key")
        }
        guard let record = result.idempotency else { return try wording(result).response }
        if record.complete { return record.answer.response }
        // A direct send through the relay: FCM's outcomes are in, and the key takes the real answer.
        let answer = Self.stored(wording, result)
        return try await registry.completeIdempotentSend(record, in: project, answer: answer).response
    }

    /// What the route gives `RegistryService.send`: the key, and the answer its result is worded as.
    static func keyed(_ request: IdempotentRequest?, _ wording: @escaping Wording) -> IdempotentSend? {
        request.map { IdempotentSend(request: $0, answer: { stored(wording, $0) }) }
    }

    /// The answer to a key already used: a replay, 422 or 409; `nil` when the key is free.
    private static func verdict(
        _ request: IdempotentRequest, family: APIFamily, project: Project, registry: RegistryService
    ) async throws -> Response? {
        switch try await registry.idempotencyVerdict(request, in: project) {
        case .new:
            return nil
        case .replay(let answer):
            var response = answer.response
            response.headers[replayedHeader] = "true"
            return response
        case .inProgress:
            throw inProgress(family)
        case .mismatch:
            throw mismatch(family)
        }
    }

    /// A result worded, a refusal included.
    private static func stored(_ wording: Wording, _ result: SendResult) -> StoredAnswer {
        do {
            return try wording(result)
        } catch let error as APIError {
            return error.storedAnswer
        } catch {
            return ErrorEnvelope.internalError(.native).storedAnswer
        }
    }

    // MARK: - Refusals, in each family's envelope

    /// 409: the first request with the key is still being answered.
    static func inProgress(_ family: APIFamily) -> APIError {
        let message = ServerWording.idempotencyKeyInProgress
        var error: APIError
        switch family {
        case .legacy, .instanceID: error = .plain(.conflict, message)
        case .v1: error = .google(.conflict, "ABORTED", message)
        case .native: error = .native(.conflict, "idempotency_key_in_use", message)
        }
        error.headers[.retryAfter] = "1"
        return error
    }

    /// 422: the key was used for another request.
    static func mismatch(_ family: APIFamily) -> APIError {
        let message = ServerWording.idempotencyKeyReused
        switch family {
        case .legacy, .instanceID: return .plain(.unprocessableContent, message)
        case .v1: return .google(.unprocessableContent, "FAILED_PRECONDITION", message)
        case .native: return .native(.unprocessableContent, "idempotency_key_reused", message)
        }
    }

    // MARK: - Fingerprints

    /// A form body's canonical form: its `name=value` pairs in order of their bytes.
    static func canonicalForm(_ body: String) -> [UInt8] {
        Array(
            body.split(separator: "&", omittingEmptySubsequences: true).map(String.init).sorted().joined(separator: "&")
                .utf8)
    }
}

extension StoredAnswer {
    /// The answer as a response: its status, its headers, its body byte for byte.
    var response: Response {
        var fields = HTTPFields()
        for pair in headers where pair.count == 2 {
            if let name = HTTPField.Name(pair[0]) { fields.append(HTTPField(name: name, value: pair[1])) }
        }
        return Response(
            status: HTTPResponse.Status(code: status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body))
        )
    }

    init(status: HTTPResponse.Status, headers: HTTPFields, body: [UInt8]) {
        self.init(
            status: status.code, headers: headers.map { [$0.name.rawName, $0.value] }, body: body)
    }
}

extension APIError {
    /// The error as a stored answer, as `response` sends it.
    var storedAnswer: StoredAnswer {
        var fields = headers
        fields[.contentType] = "application/json; charset=UTF-8"
        return StoredAnswer(status: status, headers: fields, body: body)
    }
}
