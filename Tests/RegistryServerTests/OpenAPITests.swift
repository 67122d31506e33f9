import Foundation
import Hummingbird
import HummingbirdTesting
import Prometheus
import Registry
import RegistryApp
import TestBackends
import Testing
import XMPPServer

@testable import RegistryServer

/// `/openapi.json` is the contract: it describes every route the server serves, and nothing else.
@Suite("The OpenAPI document", .onEveryBackend)
struct OpenAPITests {
    /// (method, path) of every operation in the document, paths as OpenAPI writes them.
    private func documented() throws -> Set<String> {
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.bytes)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options"]
        return Set(paths.flatMap { path, item in item.keys.filter(methods.contains).map { "\($0.uppercased()) \(path)" } })
    }

    /// (method, path) of every route recorded, `:name` written `{name}`.
    private func routed() async throws -> Set<String> {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let routes = routing(
            registry: registry, metrics: PrometheusCollectorRegistry(), sessions: XMPPHub(registry: registry)
        ).routes
        return Set(
            routes.map { route in
                let path = route.path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
                    segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
                }.joined(separator: "/")
                return "\(route.method.rawValue) \(path)"
            })
    }

    @Test("Every route is documented, and every documented operation is routed")
    func coverage() async throws {
        let documented = try documented()
        let routed = try await routed()
        #expect(routed.subtracting(documented).sorted() == [], "routes missing from Resources/openapi.json")
        #expect(documented.subtracting(routed).sorted() == [], "documented operations no route serves")
        #expect(routed.count > 30)
    }

    @Test("The audit log's action filter lists exactly the actions the code writes")
    func auditActions() throws {
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.bytes)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let get = try #require(paths["/api/audit"]?["get"] as? [String: Any])
        let parameters = try #require(get["parameters"] as? [[String: Any]])
        let action = try #require(parameters.first { $0["name"] as? String == "action" })
        let listed = try #require((action["schema"] as? [String: Any])?["enum"] as? [String])
        #expect(listed == AuditAction.allCases.map(\.rawValue))
    }

    @Test("GET /openapi.json answers the document without a key")
    func served() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(.get, "/openapi.json", auth: .some(nil))
            #expect(reply.status == .ok)
            #expect(reply.headers[.contentType] == "application/json; charset=UTF-8")
            #expect(reply.json?["openapi"] == "3.1.0")
        }
    }
}
