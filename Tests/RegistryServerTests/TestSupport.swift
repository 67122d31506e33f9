import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Registry
import RegistryApp
import RegistryServer
import RegistrySQLite
import TestBackends
import Testing
import XMPPServer

/// JSON as a comparable value, so tests state the exact bodies FCM sends and returns.
enum JSON: Equatable, Sendable, Decodable, ExpressibleByStringLiteral, ExpressibleByDictionaryLiteral,
    ExpressibleByArrayLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral
{
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON].self))
        }
    }

    init(stringLiteral value: String) { self = .string(value) }
    init(dictionaryLiteral elements: (String, JSON)...) { self = .object(Dictionary(uniqueKeysWithValues: elements)) }
    init(arrayLiteral elements: JSON...) { self = .array(elements) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    subscript(key: String) -> JSON? {
        if case .object(let fields) = self { fields[key] } else { nil }
    }

    var string: String? {
        if case .string(let value) = self { value } else { nil }
    }

    var array: [JSON]? {
        if case .array(let value) = self { value } else { nil }
    }
}

/// A response with its body parsed.
struct Reply {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var json: JSON?
}

/// A running application over an in-memory registry with one project ("test-app", sender 123456789012).
struct Fixture: Sendable {
    let registry: RegistryService
    let project: Project
    let key: String

    static func make() async throws -> Fixture {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        try await registry.startAudience()
        let (project, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        return Fixture(registry: registry, project: project, key: key)
    }

    /// Runs `body` against the application through Hummingbird's router test client.
    func test(
        _ mode: TestingSetup = .router, readyMaximumLag: Duration = .seconds(10),
        _ body: @escaping @Sendable (Client) async throws -> Void
    ) async throws {
        var settings = HTTPSettings()
        settings.port = 0
        settings.readyMaximumLag = readyMaximumLag
        let app = buildApplication(
            registry: registry, settings: settings, logger: Logger(label: "test"),
            sessions: XMPPHub(registry: registry))
        try await app.test(mode) { client in
            try await body(Client(client: client, key: key))
        }
    }

    /// Small typed helpers over the test client.
    struct Client: Sendable {
        let client: any TestClientProtocol
        let key: String

        /// Sends a request authenticated with the fixture's key (`Authorization: key=…`) unless `auth` says otherwise.
        func call(
            _ method: HTTPRequest.Method, _ uri: String, body: String? = nil, auth: String?? = .none,
            headers extra: HTTPFields = [:]
        ) async throws -> Reply {
            var headers = extra
            switch auth {
            case .none: headers[.authorization] = "key=\(key)"
            case .some(.some(let value)): headers[.authorization] = value
            case .some(.none): break
            }
            if body != nil { headers[.contentType] = "application/json" }
            return try await client.execute(
                uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }
            ) { response in
                let data = Data(response.body.readableBytesView)
                return Reply(
                    status: response.status, headers: response.headers,
                    json: data.isEmpty ? nil : try? JSONDecoder().decode(JSON.self, from: data))
            }
        }

        /// `POST /fcm/notification` with a JSON body.
        func groups(_ body: String) async throws -> Reply {
            try await call(.post, "/fcm/notification", body: body)
        }

        /// Creates a group and returns its key.
        func createGroup(_ name: String, _ tokens: [String]) async throws -> String {
            let reply = try await groups(
                #"{"operation":"create","notification_key_name":"\#(name)","registration_ids":\#(jsonArray(tokens))}"#)
            return try #require(reply.json?["notification_key"]?.string)
        }
    }
}

func jsonArray(_ strings: [String]) -> String {
    String(decoding: try! JSONEncoder().encode(strings), as: UTF8.self)
}

/// A well-formed token that looks like FCM's.
func token(_ n: Int) -> String {
    "dev\(n)xxxxxxxxxxxxxxxxx:APA91b" + String(repeating: "Q", count: 20) + "\(n)"
}
