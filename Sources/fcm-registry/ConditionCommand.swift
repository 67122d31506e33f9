import ArgumentParser
import Conditions
import Foundation

/// `fcm-registry condition …`: work with topic conditions.
struct ConditionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "condition",
        abstract: "Check FCM topic conditions.",
        subcommands: [Check.self]
    )

    /// `fcm-registry condition check '<expr>'`: exit 0 with the canonical form, or 1 with diagnostics.
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Parse a condition, print its canonical form, and explain any problem with a caret.",
            discussion: """
                Exit status: 0 when the condition is valid (warnings go to stderr), 1 when it is not.
                Example: fcm-registry condition check "'a' in topics && !('b' in topics)"
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case text
            case json
        }

        @Argument(help: "The condition, e.g. \"'weather' in topics && 'news' in topics\".")
        var expression: String

        @Option(
            help:
                "Rules to check against: legacy (seeds: && and ||, at most 2 operators), v1 (at most 5 topics), extended (no FCM caps)."
        )
        var dialect: Dialect = .v1

        @Option(help: "text: canonical form on stdout, diagnostics on stderr; json: one report object on stdout.")
        var format: Format = .text

        func run() throws {
            let report = ConditionReport(checking: expression, dialect: dialect)
            switch format {
            case .json:
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(report), as: UTF8.self))
            case .text:
                for finding in report.diagnostics {
                    FileHandle.standardError.write(Data((finding.rendered + "\n").utf8))
                }
                if let canonical = report.canonical { print(canonical) }
            }
            if !report.valid { throw ExitCode(1) }
        }
    }
}

extension Dialect: ExpressibleByArgument {}
