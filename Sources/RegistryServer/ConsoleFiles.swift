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

    /// The files under `/console/`, by name; `index.html` is also `/console` itself.
    static let files: [String: File] = [
        "index.html": File(contentType: "text/html; charset=UTF-8", bytes: PackageResources.index_html),
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
    ]

    static let javaScript = "text/javascript; charset=UTF-8"

    /// What the console may do: its own scripts, styles and API, nothing inline, nothing framed.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func addRoutes(to routes: RouteRecorder) {
        routes.on("/console", .get) { _, _ in try response(for: "index.html") }
        routes.on("/console/:file", .get) { request, context in
            try response(for: try context.parameters.require("file"))
        }
    }

    static func response(for name: String) throws -> Response {
        guard let file = files[name] else {
            throw ErrorEnvelope.notFound(.native, "the console has no file named \(name)")
        }
        return Response(
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
