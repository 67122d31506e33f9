import Foundation

/// A project's settings for the channel its messages leave through (`project relay`), or for the
/// service its device groups are mirrored from (`project mirror`), as the store keeps them: the
/// channel's name, what may be shown, and what may not. Only the channel reads the fields; the
/// registry stores, copies and lists them without knowing one, so a new channel needs no new
/// column (the `relay` and `mirror` tables keep `channel`, `settings` and `secrets` as JSON text).
///
/// Printed (`description`, a log line, a failed test), it names its secrets but never shows them.
public struct ChannelSettings: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The channel's name: `fcm-v1` for FCM HTTP v1.
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

    /// Settings as a row keeps them. Text that is not a JSON object (a row written by hand, say)
    /// reads as no fields: the channel then refuses the settings and that project's messages wait
    /// for new ones, while every other project's go on.
    public init(channel: String, settingsJSON: String, secretsJSON: String) {
        self.init(channel: channel, settings: Self.fields(ofJSON: settingsJSON), secrets: Self.fields(ofJSON: secretsJSON))
    }

    /// The fields of a `settings` or `secrets` column; none when it is not a JSON object.
    public static func fields(ofJSON text: String) -> [String: JSONValue] {
        (try? JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8))) ?? [:]
    }

    /// `settings` as a row keeps it: a JSON object, keys sorted, so equal settings are equal text.
    public var settingsJSON: String { Self.text(settings) }
    /// `secrets` as a row keeps it.
    public var secretsJSON: String { Self.text(secrets) }

    public var description: String {
        "\(channel) \(settingsJSON), secrets \(secrets.keys.sorted()) (not shown)"
    }

    public var debugDescription: String { description }

    private static func text(_ object: [String: JSONValue]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Fields decoded from JSON or built of strings always encode; only a number that is not
        // finite would not, and no channel keeps one.
        return (try? encoder.encode(object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// A channel's stored settings it cannot use: another channel's, or a field missing. Said in the
/// operator's terms, in the warning the channel logs (at most once a minute per project).
public struct ChannelSettingsUnreadable: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
