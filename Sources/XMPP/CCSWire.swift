import Foundation

/// The exact text of what the connection server writes (XMPP reference §2–§6). Clients match some
/// of these with regular expressions, so attribute sets and their order are part of the protocol:
/// acks, nacks and control messages are bare `<message>`; upstream messages and receipts carry
/// `to`, `from` and `type="normal"`, in that order; control uses the prefixed `data:gcm`.
public enum CCSWire {
    public static let namespace = "google:mobile:data"
    /// The domain of bound JIDs and of receipts' `from`.
    public static let domain = "gcm.googleapis.com"

    /// The server's stream header, answering a client's.
    public static func streamHeader(from domain: String, id: String) -> String {
        "<stream:stream from=\"\(XMLEscaping.attribute(domain))\" id=\"\(id)\" version=\"1.0\" "
            + "xmlns=\"jabber:client\" xmlns:stream=\"http://etherx.jabber.org/streams\">"
    }

    /// Before authentication: the SASL mechanisms, in CCS's order.
    public static let saslFeatures =
        "<stream:features><mechanisms xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\">"
        + SASLCredentials.mechanisms.map { "<mechanism>\($0)</mechanism>" }.joined()
        + "</mechanisms></stream:features>"

    /// After authentication: resource binding and the (legacy) session.
    public static let sessionFeatures =
        "<stream:features><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"/>"
        + "<session xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></stream:features>"

    public static let saslSuccess = "<success xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"/>"
    public static let saslFailure =
        "<failure xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><not-authorized/></failure>"
    public static let streamEnd = "</stream:stream>"

    /// The SASL failure of a client refused for a while, its credentials unchecked (RFC 6120
    /// §6.5.12: try again later).
    public static func saslTemporaryFailure(retryAfterSeconds seconds: Int) -> String {
        "<failure xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><temporary-auth-failure/>"
            + "<text xml:lang=\"en\">too many failed logins from this address: try again in \(seconds) s</text></failure>"
    }

    /// A stream error, then the end of the stream (RFC 6120 §4.9).
    public static func streamError(_ condition: String, text: String? = nil) -> String {
        var error = "<stream:error><\(condition) xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"
        if let text {
            error += "<text xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\">\(XMLEscaping.text(text))</text>"
        }
        return error + "</stream:error>" + streamEnd
    }

    /// An ack or a nack of a downstream message.
    public static func answer(_ json: String) -> String {
        "<message><gcm xmlns=\"google:mobile:data\">\(XMLEscaping.text(json))</gcm></message>"
    }

    /// An upstream message or a delivery receipt, addressed to the app server.
    public static func upstream(_ json: String, senderID: String) -> String {
        "<message to=\"\(senderID)@\(domain)\" from=\"devices@\(domain)\" type=\"normal\">"
            + "<gcm xmlns=\"google:mobile:data\">\(XMLEscaping.text(json))</gcm></message>"
    }

    /// `CONNECTION_DRAINING`, in the prefixed form clients match literally; with a `message_id`,
    /// which one client requires of every CCS message and the others ignore.
    public static let connectionDraining =
        "<message><data:gcm xmlns:data=\"google:mobile:data\">"
        + #"{"control_type":"CONNECTION_DRAINING","message_id":"control-draining","message_type":"control"}"#
        + "</data:gcm></message>"

    /// A stanza error for a message that cannot be answered with a nack (no `message_id`, or
    /// not JSON): echoes the stanza's `id` and `<gcm>` payload, addressed to the client.
    public static func stanzaError(id: String?, to jid: String, payload: XMPPElement?, text: String) -> String {
        var out = "<message"
        if let id { out += " id=\"\(XMLEscaping.attribute(id))\"" }
        out += " type=\"error\" to=\"\(XMLEscaping.attribute(jid))\">"
        if let payload {
            out += "<gcm xmlns=\"google:mobile:data\">\(XMLEscaping.text(payload.text))</gcm>"
        }
        out += "<error code=\"400\" type=\"modify\"><bad-request xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\"/>"
        out += "<text xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\">\(XMLEscaping.text(text))</text></error></message>"
        return out
    }

    /// The answer to an IQ nobody serves.
    public static func serviceUnavailable(id: String) -> String {
        "<iq type=\"error\" id=\"\(XMLEscaping.attribute(id))\"><error type=\"cancel\">"
            + "<service-unavailable xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\"/></error></iq>"
    }

    /// A ping's answer, in the form go-xmpp recognises.
    public static func pong(id: String, from domain: String) -> String {
        "<iq from=\"\(XMLEscaping.attribute(domain))\" id=\"\(XMLEscaping.attribute(id))\" type=\"result\"/>"
    }

    public static func bindResult(id: String, jid: String) -> String {
        "<iq type=\"result\" id=\"\(XMLEscaping.attribute(id))\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\">"
            + "<jid>\(XMLEscaping.text(jid))</jid></bind></iq>"
    }

    public static func emptyResult(id: String) -> String {
        "<iq type=\"result\" id=\"\(XMLEscaping.attribute(id))\"/>"
    }

    /// JSON text for a CCS payload: keys sorted, slashes unescaped (`/topics/news` stays readable).
    public static func json(_ object: [String: Any]) -> String {
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
