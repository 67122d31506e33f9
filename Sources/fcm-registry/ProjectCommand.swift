import ArgumentParser
import Registry

/// `fcm-registry project …`: projects and their server keys.
struct ProjectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "project",
        abstract: "Create projects and manage their server keys.",
        subcommands: [Create.self, List.self, AddKey.self, RevokeKey.self]
    )

    /// What `create` and `add-key` print: the only time a server key is shown.
    struct Created: Encodable {
        var project_id: String
        var sender_id: String
        var server_key: String

        init(project: Project, serverKey: String) {
            project_id = project.projectId
            sender_id = project.senderId
            server_key = serverKey
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a project; prints {\"project_id\",\"sender_id\",\"server_key\"}.")

        @Option(help: "The numeric sender id (FCM's project number), e.g. 123456789012.")
        var senderId: String

        @Option(help: "The project id used in /v1/projects/{p} paths (default: project-<sender id>).")
        var projectId: String?

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let registry = try await database.openRegistry()
            let (project, key) = try await registry.createProject(
                projectId: projectId ?? "project-\(senderId)", senderId: senderId)
            try printJSON(Created(project: project, serverKey: key))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List projects.")
        @OptionGroup var database: DatabaseOptions

        struct Row: Encodable {
            var project_id: String
            var sender_id: String
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            try printJSON(
                try await registry.projects().map { Row(project_id: $0.projectId, sender_id: $0.senderId) })
        }
    }

    struct AddKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-key", abstract: "Add a server key to a project (for rotation); prints it once.")
        @Option(help: "The project id.") var projectId: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let registry = try await database.openRegistry()
            let (project, key) = try await registry.addServerKey(toProject: projectId)
            try printJSON(Created(project: project, serverKey: key))
        }
    }

    struct RevokeKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-key", abstract: "Revoke a server key: requests with it get 401 from then on.")
        @Argument(help: "The server key.") var key: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let registry = try await database.openRegistry()
            try await registry.revokeServerKey(key)
            print("revoked")
        }
    }
}
