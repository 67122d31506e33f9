import Foundation
import GRDB
import Registry

/// A service account and an upstream, as the `relay` and `mirror` tables both keep them.
extension SQLiteStore {
    /// A `relay` or `mirror` row's service account and upstream: both tables keep them alike.
    static func serviceAccountSettings(_ row: Row) -> RelaySettings {
        RelaySettings(
            firebaseProjectID: row["firebaseProjectId"], clientEmail: row["clientEmail"], privateKeyID: row["privateKeyId"],
            privateKey: row["privateKey"], tokenURI: row["tokenUri"], upstream: row["upstream"])
    }

    /// Inserts or replaces the project's service account and upstream in `table` (`relay` or
    /// `mirror`, never a value from outside); `alsoSetting` is more of the update's SET clause.
    static func storeServiceAccountSettings(
        _ settings: RelaySettings, of project: Project, in table: String, alsoSetting: String = "", _ db: Database
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO \(table) (projectId, firebaseProjectId, clientEmail, privateKeyId, privateKey, tokenUri, upstream, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (projectId) DO UPDATE SET
                  firebaseProjectId = excluded.firebaseProjectId, clientEmail = excluded.clientEmail,
                  privateKeyId = excluded.privateKeyId, privateKey = excluded.privateKey,
                  tokenUri = excluded.tokenUri, upstream = excluded.upstream\(alsoSetting)
                """,
            arguments: [
                project.rowID, settings.firebaseProjectID, settings.clientEmail, settings.privateKeyID, settings.privateKey,
                settings.tokenURI, settings.upstream, EpochMilliseconds.now(),
            ])
    }
}
