import ArgumentParser
import FCMRelay
import FCMWire
import Foundation
import Registry

/// `fcm-registry project …`: projects and their server keys.
struct ProjectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "project",
        abstract: "Create projects and manage their server keys.",
        subcommands: [
            Create.self, List.self, Show.self, AddKey.self, RevokeKey.self, ServiceAccountCommand.self,
            RevokeServiceAccount.self, Relay.self, Mirror.self, Tokens.self,
        ]
    )

    /// What `create` and `add-key` print: the only time a server key is shown.
    struct Created: Encodable {
        var project_id: String
        var sender_id: String
        var server_key: String
        /// Printed for a key made with `--name` or `--scope` only, so the default output stays as it was.
        var key_id: String?
        var name: String?
        var scopes: [String]?

        init(project: Project, serverKey: String) {
            project_id = project.projectId
            sender_id = project.senderId
            server_key = serverKey
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Create a project; prints {\"project_id\",\"sender_id\",\"server_key\"}, or writes it to --output.")

        @Option(help: "The numeric sender id (FCM's project number), e.g. 123456789012.")
        var senderId: String

        @Option(help: "The project id used in /v1/projects/{p} paths (default: project-<sender id>).")
        var projectId: String?

        @Option(help: "Write the JSON here, created with mode 0600 (it holds the server key), instead of stdout.")
        var output: String?
        @Flag(help: "Replace the --output file if it exists.") var force = false

        @OptionGroup var database: DatabaseOptions

        func validate() throws {
            if force, output == nil { throw ValidationError(CommandWording.forceNeedsOutput) }
        }

        func run() async throws {
            // The file first: a key printed nowhere would leave a project no one can use.
            let file = try output.map { try PrivateFile(creating: $0, replacing: force) }
            do {
                let registry = try await database.openRegistry()
                let (project, key) = try await registry.createProject(
                    projectId: projectId ?? "project-\(senderId)", senderId: senderId)
                let created = Created(project: project, serverKey: key)
                guard let file else { return try printJSON(created) }
                try file.append(try jsonText(created) + "\n")
                try file.commit()
                FileHandle.standardError.write(
                    Data("project \(project.projectId) created; its server key is in \(file.path)\n".utf8))
            } catch {
                file?.discard()
                throw error
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List projects.")
        @OptionGroup var database: DatabaseOptions

        struct Row: Encodable {
            var project_id: String
            var sender_id: String
            var service_accounts: [Account]
        }

        struct Account: Encodable {
            var private_key_id: String
            var client_email: String
            var created_at: Date
            var revoked_at: Date?
            /// Only for an account given scopes (`service-account --scope`); absent: send, subscribe, read.
            var scopes: [String]?
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            var rows: [Row] = []
            for project in try await registry.projects() {
                let accounts = try await registry.serviceAccounts(in: project).map {
                    Account(
                        private_key_id: $0.keyID, client_email: $0.clientEmail, created_at: $0.createdAt,
                        revoked_at: $0.revokedAt, scopes: $0.scopes?.names)
                }
                rows.append(Row(project_id: project.projectId, sender_id: project.senderId, service_accounts: accounts))
            }
            try printJSON(rows)
        }
    }

    struct AddKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-key",
            abstract: "Add a server key to a project; prints it once (or writes it to --output).",
            discussion: """
                Without --scope the key has every scope (admin). Scopes: send, subscribe, read, admin (admin \
                implies the others); see the table of scopes in docs/http-api.md.
                """)
        @Option(help: "The project id.") var projectId: String
        @Option(name: .customLong("scope"), help: "A scope the key has (send, subscribe, read, admin); repeat for more.")
        var scopes: [String] = []
        @Option(help: "The key's name, as GET /api/keys and project show list it.") var name: String?
        @Option(help: "Write the JSON here, created with mode 0600 (it holds the server key), instead of stdout.")
        var output: String?
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let given: KeyScopes
            do { given = scopes.isEmpty ? .all : try KeyScopes(names: scopes) } catch {
                throw ValidationError(CommandWording.scopeNames)
            }
            let file = try output.map { try PrivateFile(creating: $0, replacing: false) }
            do {
                let registry = try await database.openRegistry()
                let (project, record, key) = try await registry.addServerKey(
                    toProject: projectId, name: name ?? "", scopes: given)
                var created = Created(project: project, serverKey: key)
                if name != nil || !scopes.isEmpty {
                    (created.key_id, created.name, created.scopes) = (String(record.id), record.name, record.scopes.names)
                }
                guard let file else { return try printJSON(created) }
                try file.append(try jsonText(created) + "\n")
                try file.commit()
                FileHandle.standardError.write(Data("a key of \(project.projectId) is in \(file.path)\n".utf8))
            } catch {
                file?.discard()
                throw error
            }
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

    struct ServiceAccountCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "service-account",
            abstract: "Create a service account: prints (or writes) a standard credentials JSON file.",
            discussion: """
                The Firebase Admin SDKs load the file unchanged and exchange a signed JWT for an access token at \
                its token_uri. Only the public key is stored: the private key exists only in this output.
                """)

        @OptionGroup var project: ProjectOption
        @Option(help: "The token_uri in the file (default: Google's, for a client that maps Google's host names).")
        var tokenURI: String = "https://oauth2.googleapis.com/token"
        @Option(help: "Write the file here (mode 0600) instead of stdout.") var output: String?
        @Option(
            name: .customLong("scope"),
            help: "A scope its access tokens have (send, subscribe, read, admin); repeat for more. Default: send, subscribe, read, as FCM's.")
        var scopes: [String] = []
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let given: KeyScopes?
            do { given = scopes.isEmpty ? nil : try KeyScopes(names: scopes) } catch {
                throw ValidationError(CommandWording.scopeNames)
            }
            let registry = try await database.openRegistry()
            let chosen = try await project.resolve(in: registry)
            let (_, file) = try await registry.createServiceAccount(
                forProject: chosen.projectId, tokenURI: tokenURI, scopes: given)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = try encoder.encode(file)
            guard let output else {
                print(String(decoding: data, as: UTF8.self))
                return
            }
            guard FileManager.default.createFile(atPath: output, contents: data, attributes: [.posixPermissions: 0o600])
            else { throw ValidationError(CommandWording.cannotWrite(output)) }
            FileHandle.standardError.write(Data("service account \(file.client_email) written to \(output)\n".utf8))
        }
    }

    struct RevokeServiceAccount: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-service-account",
            abstract: "Revoke a service account by its private_key_id: its JWTs are refused from then on.")
        @Argument(help: "The private_key_id.") var keyID: String
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let registry = try await database.openRegistry()
            try await registry.revokeServiceAccount(keyID: keyID)
            print("revoked")
        }
    }

    /// What `show` and `relay` print of a project's relay: never the key. FCM's settings by name;
    /// another channel's (or settings FCM cannot read) as they are kept, under `settings`.
    struct RelayState: Encodable {
        var channel: String
        var firebase_project_id: String?
        var client_email: String?
        var token_uri: String?
        var upstream: String?
        var settings: [String: JSONValue]?
        var pending: Int?
        var in_flight: Int?
        var delivered: Int?
        var failed: Int?
        var pruned: Int?
        var paused_until: Date?
        var last_error: String?
        /// Sends a second for all servers together; `nil`: serve's `--relay-rate`.
        var rate: Int?

        init(_ stored: ChannelSettings, status: RelayStatus?) {
            channel = stored.channel
            if let fcm = try? FCMSettings(stored) {
                firebase_project_id = fcm.firebaseProjectID
                client_email = fcm.clientEmail
                token_uri = fcm.tokenURI
                upstream = fcm.upstream
            } else {
                settings = stored.settings
            }
            pending = status?.pending
            in_flight = status?.inFlight
            delivered = status?.delivered
            failed = status?.failed
            pruned = status?.pruned
            paused_until = status?.pausedUntil
            last_error = status?.lastError
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a project: its ids, service accounts, and its relay to FCM (never a key).")
        @OptionGroup var project: ProjectOption
        @OptionGroup var database: DatabaseOptions

        struct Shown: Encodable {
            var project_id: String
            var sender_id: String
            var service_accounts: [List.Account]
            /// Every server key, revoked ones included: never the key itself.
            var keys: [Key]
            /// `null` when the project does not relay: messages are logged, not delivered.
            var relay: RelayState?

            private enum CodingKeys: String, CodingKey {
                case project_id, sender_id, service_accounts, keys, relay
            }

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(project_id, forKey: .project_id)
                try container.encode(sender_id, forKey: .sender_id)
                try container.encode(service_accounts, forKey: .service_accounts)
                try container.encode(keys, forKey: .keys)
                try container.encode(relay, forKey: .relay)
            }
        }

        /// A server key as `show` lists it.
        struct Key: Encodable {
            var id: String
            var name: String
            var scopes: [String]
            var created_at: Date
            var last_used_at: Date?
            var revoked_at: Date?

            init(_ record: ServerKeyRecord) {
                (id, name, scopes, created_at) = (String(record.id), record.name, record.scopes.names, record.createdAt)
                (last_used_at, revoked_at) = (record.lastUsedAt, record.revokedAt)
            }
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            let chosen = try await project.resolve(in: registry)
            let keys = try await registry.serverKeys(in: chosen).map(Key.init)
            let accounts = try await registry.serviceAccounts(in: chosen).map {
                List.Account(
                    private_key_id: $0.keyID, client_email: $0.clientEmail, created_at: $0.createdAt,
                    revoked_at: $0.revokedAt, scopes: $0.scopes?.names)
            }
            var relay: RelayState?
            if let settings = try await registry.relaySettings(of: chosen) {
                relay = RelayState(settings, status: try await registry.relayStatus(in: chosen))
                relay?.rate = try await registry.sendRate(of: chosen)
            }
            try printJSON(
                Shown(
                    project_id: chosen.projectId, sender_id: chosen.senderId, service_accounts: accounts, keys: keys,
                    relay: relay))
        }
    }

    struct Relay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliver a project's messages to devices through FCM HTTP v1, or stop (--off).",
            discussion: """
                FILE is the Firebase project's service-account key, as the Firebase console downloads it: messages \
                go to its project_id, with access tokens from its token_uri. The key is kept in the database and \
                never printed. --rate N holds the project to N sends a second to FCM, for all servers on the \
                database together (alone, it changes just the rate). A running server takes the change within a \
                second. See docs/relay.md.
                """)

        @OptionGroup var project: ProjectOption
        @Option(name: .customLong("service-account"), help: "The service-account JSON file of the Firebase project.")
        var serviceAccount: String?
        @Option(help: "The FCM API's base URL, for a proxy or an emulator.")
        var upstream: String = FCMSettings.googleUpstream
        @Option(
            help:
                "Sends a second to FCM for this project, all servers together (default: serve's --relay-rate; FCM's quota is 10000)."
        )
        var rate: Int?
        @Flag(help: "Clear the project's own rate: serve's --relay-rate holds for it again.") var defaultRate = false
        @Flag(help: "Turn delivery off: what is still pending fails with RELAY_OFF.") var off = false
        @OptionGroup var database: DatabaseOptions

        func validate() throws {
            if defaultRate, rate != nil { throw ValidationError(CommandWording.rateOrDefaultRate) }
            guard off != (serviceAccount != nil || rate != nil || defaultRate) else {
                throw ValidationError(CommandWording.relayWhatToDo)
            }
            if let rate, !SendRate.range.contains(rate) {
                throw ValidationError(CommandWording.rateOutOfRange(upperBound: SendRate.range.upperBound))
            }
        }

        func run() async throws {
            let registry = try await database.openRegistry()
            let chosen = try await project.resolve(in: registry)
            if off {
                try await registry.turnRelayOff(projectId: chosen.projectId)
                print("relay off for \(chosen.projectId)")
                return
            }
            guard let serviceAccount else {
                guard let settings = try await registry.relaySettings(of: chosen) else {
                    throw ValidationError(CommandWording.doesNotRelay(chosen.projectId))
                }
                try await registry.setSendRate(projectId: chosen.projectId, rate: rate)
                var state = RelayState(settings, status: nil)
                state.rate = rate
                try printJSON(state)
                return
            }
            guard let data = FileManager.default.contents(atPath: serviceAccount) else {
                throw ValidationError(CommandWording.cannotRead(serviceAccount))
            }
            do {
                let settings = try FCMSettings(serviceAccountJSON: data, upstream: upstream).stored
                try await registry.setRelay(projectId: chosen.projectId, settings)
                if rate != nil || defaultRate { try await registry.setSendRate(projectId: chosen.projectId, rate: rate) }
                var state = RelayState(settings, status: nil)
                state.rate = try await registry.sendRate(of: chosen)
                try printJSON(state)
            } catch let error as RelaySetupError {
                throw ValidationError(error.description)
            }
        }
    }
}
