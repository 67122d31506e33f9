/// A tenant: its groups, topics and tokens are invisible to every other project.
public struct Project: Sendable, Hashable, Codable {
    /// The database row id; what notification keys and foreign keys carry.
    public var rowID: Int64
    /// The string in `/v1/projects/{p}` paths, e.g. `my-app`.
    public var projectId: String
    /// The numeric sender id: FCM's `project_id` header on `/fcm/notification`, IID's `authorizedEntity`.
    public var senderId: String

    public init(rowID: Int64, projectId: String, senderId: String) {
        self.rowID = rowID
        self.projectId = projectId
        self.senderId = senderId
    }

    /// Whether `name` (a `{p}` path segment or a `project_id` header) names this project.
    /// Google accepts both the project id and the project number there.
    public func isNamed(_ name: String) -> Bool {
        name == projectId || name == senderId
    }

    /// Checks the identifiers a person chooses with `project create`.
    /// - Throws: `RegistryError.invalidProject` saying which rule failed.
    public static func validate(projectId: String, senderId: String) throws(RegistryError) {
        guard !senderId.isEmpty, senderId.count <= 20, senderId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw .invalidProject("sender id must be 1 to 20 digits, like 123456789012")
        }
        let allowed = projectId.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-")
        }
        guard (1...63).contains(projectId.count), allowed else {
            throw .invalidProject("project id must be 1 to 63 lowercase letters, digits or '-', like my-app")
        }
    }
}
