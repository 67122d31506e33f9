import ArgumentParser

/// The `fcm-registry` command: parses and dispatches to one file per subcommand.
@main
struct Tool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm-registry",
        abstract: "A self-hosted, FCM-compatible registry of device groups and topic subscriptions.",
        version: BuildInfo.description,
        subcommands: [
            ServeCommand.self, ProjectCommand.self, ConditionCommand.self, GroupCommand.self, TopicCommand.self,
            TokenCommand.self, AudienceCommand.self, ExportCommand.self, ImportCommand.self, ImportGroupsCommand.self,
            CopyCommand.self,
            SchemaCommand.self, GenerateCommand.self, TLSCommand.self,
        ]
    )
}
