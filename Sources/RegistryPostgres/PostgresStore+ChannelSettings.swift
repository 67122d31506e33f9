import Foundation
import PostgresNIO
import Registry

/// A channel's settings, as the `relay` and `mirror` tables both keep them (migration v9):
/// `channel`, `settings` and `secrets`, the last two JSON text only the channel reads.
extension PostgresStore {
    /// The columns a `relay` or `mirror` row keeps its channel settings in, alike.
    static let channelSettingsColumns = "channel, settings, secrets"

    /// Settings from `channelSettingsColumns`, in their order.
    static func channelSettings(_ columns: (String, String, String)) -> ChannelSettings {
        ChannelSettings(channel: columns.0, settingsJSON: columns.1, secretsJSON: columns.2)
    }
}

extension PostgresConnection {
    /// Inserts or replaces the project's channel settings in `table` (`relay` or `mirror`, never
    /// a value from outside); `alsoSetting` is more of the update's SET clause.
    func storeChannelSettings(
        _ settings: ChannelSettings, of project: Project, in table: String, alsoSetting: String = "", now: Int64
    ) async throws {
        try await run(
            #"""
            INSERT INTO \#(unescaped: table) ("projectId", \#(unescaped: PostgresStore.channelSettingsColumns), "createdAt")
            VALUES (\#(project.rowID), \#(settings.channel), \#(settings.settingsJSON), \#(settings.secretsJSON), \#(now))
            ON CONFLICT ("projectId") DO UPDATE SET
              channel = excluded.channel, settings = excluded.settings, secrets = excluded.secrets\#(unescaped: alsoSetting)
            """#)
    }
}
