import Foundation
import Registry

extension UpstreamMessage {
    /// What `FirebaseMessaging.send` on a device hands the app server: the `<gcm>` JSON of CCS's
    /// upstream stanza, keys sorted and slashes unescaped as the XMPP wire writes it
    /// (`CCSWire.json`), so a message reads the same whichever front end took it.
    public static func fromDevice(
        token: String, category: String, data: [String: String], messageID: String, timeToLive: Int?
    ) -> UpstreamMessage {
        var json: [String: Any] = ["category": category, "data": data, "message_id": messageID, "from": token]
        if let timeToLive { json["time_to_live"] = timeToLive }
        let text =
            (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes]))
            .map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return UpstreamMessage(messageID: messageID, json: text, isReceipt: false)
    }
}
