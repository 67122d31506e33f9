import Foundation

/// A project's settings for the channel its messages leave through (`project relay`), or for the
/// service its device groups are mirrored from (`project mirror`), as the store keeps them: the
/// channel's name, what may be shown, and what may not. Only the channel reads the fields; the
/// registry stores, copies and lists them without knowing one, so a new channel needs no new
/// column (the `relay` and `mirror` tables keep `channel`, `settings` and `secrets` as JSON text).
public struct ChannelSettings: Sendable, Hashable {
    /// The channel's name, e.g. `fcm-v1` (`FCMSettings.channel`).
    public var channel: String
    /// Settings anyone who may see the project may see: `GET /api/relay` and `project show` list them.
    public var settings: [String: JSONValue]
    /// Keys and passwords: kept in the database, read by the channel, never shown.
    public var secrets: [String: JSONValue]

    public init(channel: String, settings: [String: JSONValue], secrets: [String: JSONValue]) {
        self.channel = channel
        self.settings = settings
        self.secrets = secrets
    }

    /// Settings as a row keeps them: `settings` and `secrets` as JSON objects.
    /// - Throws: `ChannelSettingsUnreadable` when either is not a JSON object.
    public init(channel: String, settingsJSON: String, secretsJSON: String) throws(ChannelSettingsUnreadable) {
        func object(_ text: String, _ column: String) throws(ChannelSettingsUnreadable) -> [String: JSONValue] {
            guard let value = try? JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8)) else {
                throw ChannelSettingsUnreadable("the \(channel) channel's \(column) are not a JSON object")
            }
            return value
        }
        self.init(channel: channel, settings: try object(settingsJSON, "settings"), secrets: try object(secretsJSON, "secrets"))
    }

    /// `settings` as a row keeps it: a JSON object, keys sorted, so equal settings are equal text.
    public var settingsJSON: String { Self.text(settings) }
    /// `secrets` as a row keeps it.
    public var secretsJSON: String { Self.text(secrets) }

    private static func text(_ object: [String: JSONValue]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A dictionary of JSON values always encodes.
        return (try? encoder.encode(object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// A channel's stored settings that cannot be read: text that is not JSON, a field missing, the
/// settings of another channel. Said in the operator's terms, as the project's `lastError`.
public struct ChannelSettingsUnreadable: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
