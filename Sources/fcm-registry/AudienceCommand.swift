import ArgumentParser
import AudienceEngine
import Conditions
import FCMWire
import Foundation
import Registry

/// `fcm-registry audience count|list`: who a token, group, topic or condition reaches, from the database.
struct AudienceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audience",
        abstract: "Count or list the tokens a token, group, topic or condition reaches.",
        subcommands: [Count.self, List.self]
    )

    /// Exactly one target.
    struct Target: ParsableArguments {
        @Option(help: "A topic condition, e.g. \"'a' in topics && !('b' in topics)\".") var condition: String?
        @Option(help: "Dialect of --condition.") var dialect: Dialect = .extended
        @Option(help: "A topic name.") var topic: String?
        @Option(help: "A device group name.") var group: String?
        @Option(help: "A notification key.") var notificationKey: String?
        @Option(help: "A registration token.") var token: String?
        @Option(
            name: .customLong("where"),
            help: "Only the tokens that say this: a JSON object as `where` in POST /api/audiences:resolve, e.g. '{\"platform\":[\"ios\"],\"locale\":[\"fr\"]}'."
        ) var filter: String?

        func validate() throws {
            let given = [condition, topic, group, notificationKey, token].compactMap { $0 }
            guard given.count == 1 else {
                throw ValidationError(CommandWording.audienceTargetOne)
            }
        }

        var target: AudienceTarget {
            if let condition { return .condition(condition, dialect) }
            if let topic { return .topic(topic) }
            if let group { return .group(group) }
            if let notificationKey { return .notificationKey(notificationKey) }
            return .token(token!)
        }

        /// `--where` read as the native API reads its `where`.
        func attributeFilter() throws -> AttributeFilter? {
            guard let filter else { return nil }
            guard let json = try? JSONDecoder().decode(JSONValue.self, from: Data(filter.utf8)) else {
                throw ValidationError(CommandWording.audienceWhereNotJSON)
            }
            do {
                return try AudienceWhereCodec.filter(from: json)
            } catch let refused as BadRequest {
                throw ValidationError(refused.message)
            }
        }
    }

    struct Printed: Encodable {
        var count: Int
        var tokens: [String]?
        var nextPageToken: String?
        var topicCounts: [String: Int]?
    }

    static func run(
        _ target: Target, database: DatabaseOptions, project: ProjectOption, after: UInt32?, limit: Int, countOnly: Bool
    )
        async throws
    {
        let filter = try target.attributeFilter()
        let registry = try await database.openRegistry(loadAudience: true)
        let project = try await project.resolve(in: registry)
        do {
            let audience = try await registry.resolve(
                target.target, in: project, after: after, pageSize: limit, countOnly: countOnly, where: filter)
            try printJSON(
                Printed(
                    count: audience.count, tokens: audience.tokens, nextPageToken: audience.nextPageToken,
                    topicCounts: audience.topicCounts))
        } catch let error as ConditionError {
            FileHandle.standardError.write(Data(error.diagnostic.rendered(in: target.condition ?? "").utf8))
            throw ExitCode(1)
        }
    }

    struct Count: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "How many tokens the target reaches.")
        @OptionGroup var target: Target
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption

        func run() async throws {
            try await AudienceCommand.run(
                target, database: database, project: project, after: nil, limit: 1, countOnly: true)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A page of the tokens the target reaches.")
        @OptionGroup var target: Target
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var project: ProjectOption
        @OptionGroup var page: PageOptions

        func run() async throws {
            let (after, size) = try page.resolveTokenID(.audience)
            try await AudienceCommand.run(
                target, database: database, project: project, after: after, limit: size, countOnly: false)
        }
    }
}
