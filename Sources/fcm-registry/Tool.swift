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

    /// ArgumentParser's own `main`, except that what a command's `run` throws is reported by
    /// ``ErrorReport`` (one line, the status of its kind), and that `--version` alone asks the
    /// checkout for its commit (``BuildInfo/versionLine()``) without any other command paying for it.
    static func main() async {
        if CommandLine.arguments.dropFirst().elementsEqual(["--version"]) {
            print(BuildInfo.versionLine())
            return
        }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: ErrorReport.reported(error))
        }
    }
}
