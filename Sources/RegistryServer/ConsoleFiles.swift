import FCMWire
import HTTPTypes
import Hummingbird

/// `GET /console`: the web console, a page and its modules compiled into the binary, like the
/// OpenAPI document, so the release archive stays one file and the console works offline.
///
/// The console is plain HTML, CSS and JavaScript modules (`Resources/console/`), with no build step.
/// It is static: it signs in with a server key kept in the tab's session storage and calls only
/// the documented API, so serving it needs no key and adds no logic of its own. Its answers forbid
/// everything the console does not do (inline scripts, other origins, framing).
enum ConsoleFiles {
    struct File {
        var contentType: String
        var bytes: [UInt8]
    }

    /// `/console` itself. Its links are relative (`console/main.js`), so the console works under a
    /// proxy's path prefix; for them to resolve, the page is served at `/console` only.
    static let page = File(contentType: "text/html; charset=UTF-8", bytes: PackageResources.index_html)

    /// The files under `/console/`, by name.
    static let files: [String: File] = [
        "console.css": File(contentType: "text/css; charset=UTF-8", bytes: PackageResources.console_css),
        "main.js": File(contentType: javaScript, bytes: PackageResources.main_js),
        "api.js": File(contentType: javaScript, bytes: PackageResources.api_js),
        "dom.js": File(contentType: javaScript, bytes: PackageResources.dom_js),
        "chart.js": File(contentType: javaScript, bytes: PackageResources.chart_js),
        "overview.js": File(contentType: javaScript, bytes: PackageResources.overview_js),
        "conditions.js": File(contentType: javaScript, bytes: PackageResources.conditions_js),
        "audiences.js": File(contentType: javaScript, bytes: PackageResources.audiences_js),
        "token.js": File(contentType: javaScript, bytes: PackageResources.token_js),
        "messages.js": File(contentType: javaScript, bytes: PackageResources.messages_js),
        "relay.js": File(contentType: javaScript, bytes: PackageResources.relay_js),
        "history.js": File(contentType: javaScript, bytes: PackageResources.history_js),
        "compose.js": File(contentType: javaScript, bytes: PackageResources.compose_js),
        "webhooks.js": File(contentType: javaScript, bytes: PackageResources.webhooks_js),
        "audit.js": File(contentType: javaScript, bytes: PackageResources.audit_js),
    ]

    static let javaScript = "text/javascript; charset=UTF-8"

    /// What the console may do: its own scripts, styles and API, nothing inline, nothing framed.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func addRoutes(to routes: RouteRecorder) {
        routes.on("/console", .get) { request, _ in
            // `/console/` reaches this route too; there the page's relative links would miss.
            guard !request.uri.path.hasSuffix("/") else {
                return Response(status: .permanentRedirect, headers: [.location: "../console"])
            }
            return response(for: page)
        }
        routes.on("/console/:file", .get) { _, context in
            let name = try context.parameters.require("file")
            guard let file = files[name] else {
                throw ErrorEnvelope.notFound(.native, ServerWording.noConsoleFile(name))
            }
            return response(for: file)
        }
    }

    static func response(for file: File) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: file.contentType,
                // Revalidated on every load: a new server version serves a new console at once.
                .cacheControl: "no-cache",
                .contentSecurityPolicy: contentSecurityPolicy,
                .xContentTypeOptions: "nosniff",
                .referrerPolicy: "no-referrer",
            ],
            body: .init(byteBuffer: ByteBuffer(bytes: file.bytes)))
    }
}

extension HTTPField.Name {
    fileprivate static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}
