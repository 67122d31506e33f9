import Foundation
import GRDB
import Registry

/// A channel's settings, as the `relay` and `mirror` tables both keep them (migration v15):
/// `channel`, `settings` and `secrets`, the last two JSON text only the channel reads.
extension SQLiteStore {
    /// A `relay` or `mirror` row's channel settings.
    static func channelSettings(_ row: Row) -> ChannelSettings {
        ChannelSettings(channel: row["channel"], settingsJSON: row["settings"], secretsJSON: row["secrets"])
    }

    /// Inserts or replaces the project's channel settings in `table` (`relay` or `mirror`, never
    /// a value from outside); `alsoSetting` is more of the update's SET clause.
    static func storeChannelSettings(
        _ settings: ChannelSettings, of project: Project, in table: String, alsoSetting: String = "", _ db: Database
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO \(table) (projectId, channel, settings, secrets, createdAt)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (projectId) DO UPDATE SET
                  channel = excluded.channel, settings = excluded.settings, secrets = excluded.secrets\(alsoSetting)
                """,
            arguments: [
                project.rowID, settings.channel, settings.settingsJSON, settings.secretsJSON, EpochMilliseconds.now(),
            ])
    }
}
