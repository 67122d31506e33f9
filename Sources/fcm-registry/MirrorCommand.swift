import ArgumentParser
import FCMRelay
import FCMWire
import Foundation
import Registry

extension ProjectCommand {
    /// `project mirror`: forward the app's device-group calls to Google while learning them here.
    struct Mirror: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mirror Google's device groups while Google still serves them, or stop (--off); --report counts what is known.",
            discussion: """
                While the mirror is on, every /fcm/notification call the app makes here (create, add, remove, and \
                look-ups) goes to Google's /fcm/notification first, with FILE's access token and the project_id \
                header; Google's answer is what the app gets, and on success the same change is recorded here, \
                Google's key kept. A group first met through add or remove is recorded with the members seen and \
                marked incomplete; a send to its key goes to Google as an HTTP v1 send to that key. If Google is \
                unreachable or refuses, nothing is recorded; a 200 without a usable key, or a refusal of FILE's \
                service account, is answered 502, never as a success. --report prints the groups complete and \
                incomplete and the members learned. See docs/migrate-from-fcm.md.
                """)

        @OptionGroup var project: ProjectOption
        @Option(name: .customLong("service-account"), help: "The service-account JSON file of the Firebase project.")
        var serviceAccount: String?
        @Option(help: "Google's base URL, for a proxy or another server playing Google.")
        var upstream: String = FCMSettings.googleUpstream
        @Flag(help: "Turn the mirror off: device-group calls are answered here alone.") var off = false
        @Flag(help: "Print how many groups are complete and incomplete, and the members learned.") var report = false
        @OptionGroup var database: DatabaseOptions

        func validate() throws {
            guard [off, report, serviceAccount != nil].filter({ $0 }).count == 1 else {
                throw ValidationError(CommandWording.mirrorWhatToDo)
            }
        }

        /// What `--report` and turning the mirror on print.
        struct State: Encodable {
            var project_id: String
            var mirror: String
            var upstream: String?
            var service_account: String?
            var groups: GroupCompleteness
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            let chosen = try await project.resolve(in: registry)
            if off {
                try await registry.setMirror(nil, for: chosen)
                print("mirror off for \(chosen.projectId)")
                return
            }
            if let serviceAccount {
                guard let data = FileManager.default.contents(atPath: serviceAccount) else {
                    throw ValidationError(CommandWording.cannotRead(serviceAccount))
                }
                do {
                    try await registry.setMirror(
                        FCMSettings(serviceAccountJSON: data, upstream: upstream).stored, for: chosen)
                } catch let error as RelaySetupError {
                    throw ValidationError(error.description)
                }
            }
            let stored = try await registry.mirrorSettings(of: chosen)
            let settings = stored.flatMap { try? FCMSettings($0) }
            try printJSON(
                State(
                    project_id: chosen.projectId, mirror: stored == nil ? "off" : "on", upstream: settings?.upstream,
                    service_account: settings?.clientEmail, groups: try await registry.groupCompleteness(in: chosen)))
        }
    }
}
