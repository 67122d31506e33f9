import Conditions
import Foundation
import Hummingbird

/// An error response, already worded for its API family.
///
/// Controllers throw these for request-level problems; `ErrorEnvelopeMiddleware` turns every
/// other error (domain errors, body limits, unknown paths) into one of these too.
struct APIError: HTTPResponseError, Sendable {
    var status: HTTPResponse.Status
    /// The encoded JSON body.
    var body: [UInt8]
    var headers: HTTPFields = [:]

    /// `{"error":"message"}`, the envelope of FCM's legacy and Instance ID endpoints.
    static func plain(_ status: HTTPResponse.Status, _ message: String) -> APIError {
        APIError(status: status, body: encode(["error": message]))
    }

    /// Google's envelope: `{"error":{"code":400,"message":…,"status":"INVALID_ARGUMENT","details":[…]}}`.
    static func google(
        _ status: HTTPResponse.Status, _ statusName: String, _ message: String,
        fieldViolations: [(String, String)] = [],
        fcmErrorCode: String? = nil, extraDetails: [GoogleError.Detail] = []
    ) -> APIError {
        var details: [GoogleError.Detail] = []
        if !fieldViolations.isEmpty {
            details.append(
                GoogleError.Detail(
                    type: "type.googleapis.com/google.rpc.BadRequest",
                    fieldViolations: fieldViolations.map { .init(field: $0.0, description: $0.1) }))
        }
        if let fcmErrorCode {
            details.append(
                GoogleError.Detail(type: "type.googleapis.com/google.firebase.fcm.v1.FcmError", errorCode: fcmErrorCode)
            )
        }
        details += extraDetails
        let error = GoogleError(
            error: .init(
                code: status.code, message: message, status: statusName, details: details.isEmpty ? nil : details))
        return APIError(status: status, body: encode(error))
    }

    /// fcm-registry's own envelope: `{"error":{"code":"not_found","message":…}}`.
    static func native(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> APIError {
        APIError(status: status, body: encode(["error": ["code": code, "message": message]]))
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        response
    }

    var response: Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=UTF-8"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    private static func encode(_ value: some Encodable) -> [UInt8] {
        Array((try? JSONResponse.encoder().encode(value)) ?? Data(#"{"error":"internal error"}"#.utf8))
    }
}

/// Google's error JSON.
struct GoogleError: Encodable {
    struct Body: Encodable {
        var code: Int
        var message: String
        var status: String
        var details: [Detail]?
    }

    struct Detail: Encodable {
        struct FieldViolation: Encodable {
            var field: String
            var description: String
        }

        var type: String
        var fieldViolations: [FieldViolation]?
        /// FCM's own code (`UNREGISTERED`, `INVALID_ARGUMENT`, …), in `FcmError` details.
        var errorCode: String?
        /// fcm-registry's diagnostic of a condition, with its position.
        var diagnostic: ConditionReport.Finding?

        enum CodingKeys: String, CodingKey {
            case type = "@type"
            case fieldViolations
            case errorCode
            case diagnostic
        }
    }

    var error: Body
}
