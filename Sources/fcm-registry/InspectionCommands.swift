import ArgumentParser
import FCMWire
import Foundation
import Registry

/// Options shared by listings: the page model of the HTTP API (`pageSize`, `pageToken`).
struct PageOptions: ParsableArguments {
    @Option(help: "Entries per page (at most 2000).") var pageSize: Int = 100
    @Option(help: "Continue where the previous page ended: its nextPageToken.") var pageToken: String?

    func validate() throws {
        guard pageSize > 0 else { throw ValidationError(CommandWording.pageSizeNotPositive) }
    }

    /// The size, at most `maximum`, and the position the token names in `listing`.
    func resolve(_ listing: PageToken.Listing, maximum: Int = 2000) throws -> (after: String?, size: Int) {
        (try readingToken { try request.position(in: listing) }, request.size(default: 100, maximum: maximum))
    }

    /// The size, and the token id the token names in a listing of token ids (an audience).
    func resolveTokenID(_ listing: PageToken.Listing, maximum: Int = 2000) throws -> (after: UInt32?, size: Int) {
        (try readingToken { try request.tokenID(in: listing) }, request.size(default: 100, maximum: maximum))
    }

    private var request: PageRequest { PageRequest(size: pageSize, token: pageToken) }

    private func readingToken<T>(_ read: () throws -> T) throws -> T {
        do {
            return try read()
        } catch {
            throw ValidationError(CommandWording.pageTokenNotIssued)
        }
    }
}

/// A page of a listing as the commands print it, as the HTTP API pages.
struct PrintedPage<Item: Encodable & Sendable>: Encodable {
    var items: [Item]
    var nextPageToken: String?

    init(_ page: Page<Item>, _ listing: PageToken.Listing) {
        items = page.items
        nextPageToken = page.nextPageToken(listing)
    }
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
        @Flag(help: "Only groups first met through a mirrored add or remove: Google may know members not listed here.")
        var incomplete = false

        func run() async throws {
            let registry = try await database.openRegistry()
            let (after, size) = try page.resolve(.groups)
            let result = try await registry.groups(
                in: project.resolve(in: registry), after: after, limit: size, incompleteOnly: incomplete)
            try printJSON(PrintedPage(result, .groups))
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
            let (after, size) = try page.resolve(.groupMembers)
            guard
                let (group, members) = try await registry.groupMembers(
                    named: name, in: project.resolve(in: registry), after: after, limit: size)
            else { throw ValidationError(CommandWording.noGroupNamed(name)) }
            try printJSON(Shown(group: group, members: PrintedPage(members, .groupMembers)))
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
            let (after, size) = try page.resolve(.topics)
            let result = try await registry.topics(in: project.resolve(in: registry), after: after, limit: size)
            try printJSON(PrintedPage(result, .topics))
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
            let (after, size) = try page.resolve(.topicSubscribers)
            guard
                let (topic, subscribers) = try await registry.topicSubscribers(
                    named: name, in: project.resolve(in: registry), after: after, limit: size)
            else { throw ValidationError(CommandWording.noTopicNamed(name)) }
            try printJSON(Shown(topic: topic, subscribers: PrintedPage(subscribers, .topicSubscribers)))
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
            discussion: """
                One transaction per pair: TO joins every topic and group of FROM, merged with its own, and FROM is \
                unregistered. With --file, up to 1,000 pairs, one `from,to` per line; each pair's result or error \
                is printed, in order, as POST /api/tokens:rekey answers them.
                Examples: fcm-registry token rekey OLD_TOKEN NEW_FID
                          fcm-registry token rekey --file pairs.csv
                """)
        @Argument(help: "The registration id the device had.") var from: String?
        @Argument(help: "The registration id it has now (a Firebase installation id).") var to: String?
        @Option(help: "A file of `from,to` lines (at most 1,000) instead of FROM and TO; - for standard input.")
        var file: String?
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption

        static let batchLimit = 1_000

        func validate() throws {
            guard (from != nil && to != nil && file == nil) || (from == nil && to == nil && file != nil) else {
                throw ValidationError(CommandWording.rekeyWhatToDo)
            }
        }

        /// One pair's outcome: what moved, or why nothing did.
        struct Result: Encodable {
            var from: String
            var to: String
            var topics: [String]?
            var groups: [String]?
            var error: String?
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            let project = try await project.resolve(in: registry)
            if let from, let to {
                try printJSON(try await registry.rekey(from, to: to, in: project))
                return
            }
            var results: [Result] = []
            for (from, to) in try readPairs(file ?? "-") {
                do {
                    let moved = try await registry.rekey(from, to: to, in: project)
                    results.append(Result(from: from, to: to, topics: moved.topics, groups: moved.groups))
                } catch let error as RegistryError {
                    results.append(Result(from: from, to: to, error: error.wording.message))
                }
            }
            try printJSON(["results": results])
            if results.contains(where: { $0.error != nil }) { throw ExitCode.failure }
        }

        /// The file's pairs: `from,to` per line, blank lines skipped; an error names its line.
        private func readPairs(_ file: String) throws -> [(String, String)] {
            // 1,000 pairs of two 4,096-byte tokens fit in 8 MiB and a bit.
            let limit = 9 << 20
            let data =
                file == "-"
                ? FileHandle.standardInput.readData(ofLength: limit + 1)
                : try FileHandle(forReadingFrom: URL(fileURLWithPath: file)).readData(ofLength: limit + 1)
            guard data.count <= limit else { throw ValidationError(CommandWording.pairsFileTooLarge) }
            var pairs: [(String, String)] = []
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            for (index, line) in lines.enumerated() {
                let fields = line.split(separator: ",", omittingEmptySubsequences: false)
                    .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                if fields.allSatisfy(\.isEmpty) { continue }
                guard fields.count == 2 else {
                    throw ValidationError(CommandWording.pairsLineNotAPair(line: index + 1))
                }
                pairs.append((fields[0], fields[1]))
                guard pairs.count <= Self.batchLimit else {
                    throw ValidationError(CommandWording.pairsTooMany(limit: Self.batchLimit))
                }
            }
            guard !pairs.isEmpty else { throw ValidationError(CommandWording.pairsNone) }
            return pairs
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
                throw ValidationError(CommandWording.tokenUnknown)
            }
            let topics = (try await registry.allSubscriptions(ofToken: token, in: project) ?? [])
                .map { Membership(name: $0.topic, since: $0.createdAt) }
            try printJSON(
                Shown(token: info, groups: try await registry.groups(ofToken: token, in: project), topics: topics)
            )
        }
    }
}
