import ArgumentParser
import Foundation
import Registry

/// Options shared by listings: page size and cursor.
struct PageOptions: ParsableArguments {
    @Option(help: "Entries per page (at most 2000).") var limit: Int = 100
    @Option(help: "Continue after this cursor (the previous page's \"next\").") var after: String?
}

/// A page of a listing as the commands print it.
struct PrintedPage<Item: Encodable>: Encodable {
    var items: [Item]
    var next: String?
}

/// `fcm-registry group …`: device groups, read from the database.
struct GroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group", abstract: "Inspect device groups.", subcommands: [List.self, Show.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List groups with their member counts.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption
        @OptionGroup var page: PageOptions

        func run() async throws {
            let registry = try await database.openRegistry()
            let result = try await registry.groups(
                in: project.resolve(in: registry), after: page.after, limit: min(page.limit, 2000))
            try printJSON(PrintedPage(items: result.items, next: result.nextAfter))
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a group and its members.")
        @Argument(help: "The group name (notification_key_name).") var name: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption
        @OptionGroup var page: PageOptions

        struct Shown: Encodable {
            var group: GroupSummary
            var members: PrintedPage<Membership>
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            guard
                let (group, members) = try await registry.groupMembers(
                    named: name, in: project.resolve(in: registry), after: page.after, limit: min(page.limit, 2000))
            else { throw ValidationError("no group named \(name)") }
            try printJSON(Shown(group: group, members: PrintedPage(items: members.items, next: members.nextAfter)))
        }
    }
}

/// `fcm-registry topic …`: topics, read from the database.
struct TopicCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topic", abstract: "Inspect topics.", subcommands: [List.self, Show.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List topics with their subscriber counts.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption
        @OptionGroup var page: PageOptions

        func run() async throws {
            let registry = try await database.openRegistry()
            let result = try await registry.topics(
                in: project.resolve(in: registry), after: page.after, limit: min(page.limit, 2000))
            try printJSON(PrintedPage(items: result.items, next: result.nextAfter))
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a topic and a page of its subscribers.")
        @Argument(help: "The topic name.") var name: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption
        @OptionGroup var page: PageOptions

        struct Shown: Encodable {
            var topic: TopicSummary
            var subscribers: PrintedPage<Membership>
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            guard
                let (topic, subscribers) = try await registry.topicSubscribers(
                    named: name, in: project.resolve(in: registry), after: page.after, limit: min(page.limit, 2000))
            else { throw ValidationError("no topic named \(name)") }
            try printJSON(
                Shown(topic: topic, subscribers: PrintedPage(items: subscribers.items, next: subscribers.nextAfter)))
        }
    }
}

/// `fcm-registry token show TOKEN`: a token's state, groups and topics.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Inspect tokens, and move a device to a new registration id.",
        subcommands: [Show.self, Rekey.self])

    struct Rekey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move a device's topics and groups to a new registration id (a token to its FID).",
            discussion: "One transaction: TO joins every topic and group of FROM, merged with its own, and FROM is unregistered.")
        @Argument(help: "The registration id the device had.") var from: String
        @Argument(help: "The registration id it has now (a Firebase installation id).") var to: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption

        func run() async throws {
            let registry = try await database.openRegistry()
            try printJSON(try await registry.rekey(from, to: to, in: project.resolve(in: registry)))
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a token's state, groups and topics.")
        @Argument(help: "The registration token.") var token: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption

        struct Shown: Encodable {
            var token: TokenInfo
            var groups: [Membership]
            var topics: [Membership]
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            let project = try await project.resolve(in: registry)
            guard let info = try await registry.token(token, in: project) else {
                throw ValidationError("the project does not know this token")
            }
            let topics = (try await registry.allSubscriptions(ofToken: token, in: project) ?? [])
                .map { Membership(name: $0.topic, since: $0.createdAt) }
            try printJSON(
                Shown(token: info, groups: try await registry.groups(ofToken: token, in: project), topics: topics)
            )
        }
    }
}
