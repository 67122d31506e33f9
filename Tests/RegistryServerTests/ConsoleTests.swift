import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TestBackends
import Testing

@testable import RegistryServer

@Suite("The web console: its files, and the API it reads", .onEveryBackend)
struct ConsoleTests {
    /// The page and a file of the console, as a browser asks for them: no key.
    func fetch(_ client: Fixture.Client, _ uri: String) async throws -> (HTTPResponse.Status, HTTPFields, String) {
        try await client.client.execute(uri: uri, method: .get, headers: [:], body: nil) { response in
            (response.status, response.headers, String(decoding: response.body.readableBytesView, as: UTF8.self))
        }
    }

    @Test("GET /console serves the page without a key, with a policy that allows only its own files")
    func page() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (status, headers, text) = try await fetch(client, "/console")
            #expect(status == .ok)
            #expect(headers[.contentType] == "text/html; charset=UTF-8")
            #expect(text.contains(#"<script type="module" src="console/main.js"></script>"#))
            let policy = try #require(headers[.contentSecurityPolicy])
            #expect(policy.contains("script-src 'self'"))
            #expect(policy.contains("connect-src 'self'"))
            #expect(policy.contains("frame-ancestors 'none'"))
            #expect(!policy.contains("unsafe"))
            #expect(headers[.xContentTypeOptions] == "nosniff")
            // With a slash, the page's relative links would miss: it is sent to /console.
            let (moved, movedHeaders, _) = try await fetch(client, "/console/")
            #expect(moved == .permanentRedirect)
            #expect(movedHeaders[.location] == "../console")
        }
    }

    @Test("Every file the page and its modules name is served with its type; any other name is 404")
    func files() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            var named: Set<String> = []
            for file in ["index.html"] + ConsoleFiles.files.keys {
                let (status, headers, text) = try await fetch(
                    client, file == "index.html" ? "/console" : "/console/\(file)")
                #expect(status == .ok, "\(file)")
                let type = headers[.contentType] ?? ""
                if file.hasSuffix(".js") { #expect(type == "text/javascript; charset=UTF-8") }
                if file.hasSuffix(".css") { #expect(type == "text/css; charset=UTF-8") }
                // Imports and links between the console's own files.
                for match in text.matches(of: /(?:from |src=|href=)"(?:\.\/|console\/)([a-z]+\.(?:js|css))"/) {
                    named.insert(String(match.output.1))
                }
            }
            #expect(named.subtracting(ConsoleFiles.files.keys).sorted() == [], "named but not served")
            #expect(Set(ConsoleFiles.files.keys).subtracting(named).sorted() == [], "served but never named")
            for missingFile in ["secrets.js", "index.html"] {
                let (missing, _, _) = try await fetch(client, "/console/\(missingFile)")
                #expect(missing == .notFound)
            }
            let (outside, _, _) = try await fetch(client, "/console/..%2Fopenapi.json")
            #expect(outside == .notFound)
        }
    }

    @Test("GET /api/project names the key's project and its size from the index")
    func project() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/a","registration_tokens":\#(jsonArray((1...3).map(token)))}"#)
            _ = try await client.call(.put, "/api/tokens/\(token(4))")
            let reply = try await client.call(.get, "/api/project")
            #expect(
                reply.json
                    == [
                        "projectId": "test-app", "senderId": "123456789012", "registeredTokens": 4, "topics": 1,
                        "delivery": "recorded",
                        "tokenPolicy": ["staleAfter": "2592000s", "expireAfter": .null, "sendToStale": true],
                    ])
            #expect(try await client.call(.get, "/api/project", auth: .some(nil)).status == .unauthorized)
        }
    }

    @Test("Topics and groups are listed by name prefix, paged within the prefix")
    func prefix() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for topic in ["news", "news-eu", "news-us", "newt", "sport"] {
                _ = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/\(topic)")
            }
            let first = try await client.call(.get, "/api/topics?prefix=news&pageSize=2")
            #expect(first.json?["topics"]?.array?.compactMap { $0["name"]?.string } == ["news", "news-eu"])
            let next = try #require(first.json?["nextPageToken"]?.string)
            let second = try await client.call(.get, "/api/topics?prefix=news&pageSize=2&pageToken=\(next)")
            #expect(second.json?["topics"]?.array?.compactMap { $0["name"]?.string } == ["news-us"])
            #expect(second.json?["nextPageToken"] == nil)
            let none = try await client.call(.get, "/api/topics?prefix=x")
            #expect(none.json?["topics"] == [])
            for name in ["family-a", "family-b", "friends"] { _ = try await client.createGroup(name, [token(2)]) }
            let groups = try await client.call(.get, "/api/groups?prefix=fam")
            #expect(groups.json?["groups"]?.array?.compactMap { $0["name"]?.string } == ["family-a", "family-b"])
            let long = String(repeating: "a", count: 1025)
            let refused = try await client.call(.get, "/api/groups?prefix=\(long)")
            #expect(refused.status == .badRequest)
            #expect(refused.json?["error"]?["code"] == "invalid_argument")
        }
    }

    @Test("Topics by subscribers: most first, ties by name, paged, within a prefix")
    func bySubscribers() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let sizes = ["a": 2, "b": 5, "c": 2, "d": 1, "bb": 3]
            for (topic, size) in sizes {
                _ = try await client.call(
                    .post, "/iid/v1:batchAdd",
                    body: #"{"to":"/topics/\#(topic)","registration_tokens":\#(jsonArray((1...size).map(token)))}"#)
            }
            var names: [String] = []
            var counts: [JSON] = []
            var pageToken: String?
            repeat {
                let reply = try await client.call(
                    .get, "/api/topics?orderBy=subscriberCount&pageSize=2" + (pageToken.map { "&pageToken=\($0)" } ?? ""))
                #expect(reply.status == .ok)
                for topic in reply.json?["topics"]?.array ?? [] {
                    names.append(topic["name"]?.string ?? "")
                    counts.append(topic["subscriberCount"] ?? .null)
                    #expect(topic["createdAt"]?.string != nil)
                }
                pageToken = reply.json?["nextPageToken"]?.string
            } while pageToken != nil
            #expect(names == ["b", "bb", "a", "c", "d"])
            #expect(counts == [5, 3, 2, 2, 1])
            let prefixed = try await client.call(.get, "/api/topics?orderBy=subscriberCount&prefix=b")
            #expect(prefixed.json?["topics"]?.array?.compactMap { $0["name"]?.string } == ["b", "bb"])
            // A token of one order is not a position in the other.
            let byName = try await client.call(.get, "/api/topics?pageSize=1")
            let nameToken = try #require(byName.json?["nextPageToken"]?.string)
            let crossed = try await client.call(.get, "/api/topics?orderBy=subscriberCount&pageToken=\(nameToken)")
            #expect(crossed.status == .badRequest)
            let unknown = try await client.call(.get, "/api/topics?orderBy=size")
            #expect(unknown.status == .badRequest)
            #expect(unknown.json?["error"]?["code"] == "invalid_argument")
        }
    }

    @Test("The screenshots in docs/console were taken of the console as it is")
    func screenshotsAreCurrent() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let sources = root.appending(path: "Sources/RegistryServer/Resources/console")
        let manifestURL = root.appending(path: "docs/console/screenshots.json")
        let manifest = try JSONDecoder().decode(
            ScreenshotManifest.self, from: try Data(contentsOf: manifestURL))
        #expect(
            manifest.sources == (try Self.digest(of: sources)),
            "the console changed since its screenshots: run Tests/console/run-console-tests.sh --screenshots")
        let page = try String(contentsOf: root.appending(path: "docs/console.md"), encoding: .utf8)
        let taken = try FileManager.default.contentsOfDirectory(atPath: root.appending(path: "docs/console").path)
            .filter { $0.hasSuffix(".png") }
        #expect(Set(taken) == Set(manifest.screenshots), "docs/console holds other screenshots than the manifest names")
        for screenshot in manifest.screenshots {
            #expect(page.contains("console/\(screenshot)"), "docs/console.md does not show \(screenshot)")
        }
        #expect(manifest.screenshots.contains { $0.hasSuffix("-1280x800.png") })
        #expect(manifest.screenshots.contains { $0.hasSuffix("-390x844.png") })
    }

    struct ScreenshotManifest: Decodable {
        /// `sha256` of the console's files, as `digest(of:)` computes it, when the screenshots were taken.
        var sources: String
        var screenshots: [String]
    }

    /// SHA-256 over each file of the console, by name: its name, a zero byte, its length, a zero
    /// byte, its bytes. Tests/console/test_console.py computes the same.
    static func digest(of folder: URL) throws -> String {
        var hash = SHA256()
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() {
            let bytes = try Data(contentsOf: folder.appending(path: name))
            hash.update(data: Data(name.utf8) + [0] + Data(String(bytes.count).utf8) + [0])
            hash.update(data: bytes)
        }
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
