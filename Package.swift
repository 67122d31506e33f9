// swift-tools-version:6.1
import PackageDescription

/// Every target's settings: `any` spelled out for existentials, and a file sees only the members
/// of the modules it imports itself.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "fcm-registry",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fcm-registry", targets: ["fcm-registry"]),
        .library(name: "Conditions", targets: ["Conditions"]),
        .library(name: "AudienceEngine", targets: ["AudienceEngine"]),
        .library(name: "Registry", targets: ["Registry"]),
        .library(name: "FCMWire", targets: ["FCMWire"]),
        .library(name: "XMPP", targets: ["XMPP"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        /// The topic-condition language: lexer, parser, diagnostics, dialects, evaluation. Standard library only.
        .target(name: "Conditions", swiftSettings: strict),
        /// The audience engine: Roaring bitmaps, condition evaluation over them, the in-memory
        /// index with its change feed and cursor, its checkpoint file, and the threads costly
        /// work runs on. Knows projects only by row id, tokens only by id.
        .target(
            name: "AudienceEngine",
            dependencies: ["Conditions", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        /// The domain: projects, keys, tokens, groups, notification keys, topics, limits, the
        /// message pipeline, OAuth for service accounts, and the storage seams a backend implements.
        .target(
            name: "Registry",
            dependencies: [
                "Conditions",
                "AudienceEngine",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        /// FCM's wire formats without a web framework: the legacy and HTTP v1 message codecs, the
        /// one table of problem wordings, and JSON request decoding with errors that name the field.
        .target(name: "FCMWire", dependencies: ["AudienceEngine", "Conditions", "Registry"], swiftSettings: strict),
        /// The XMPP wire: a bounded stream parser for hostile XML, SASL PLAIN credentials, and the
        /// exact stanzas of FCM's XMPP connection server. Foundation only.
        .target(name: "XMPP", swiftSettings: strict),
        /// The store on SQLite through GRDB: its migrations, group commit, the change feed in SQL.
        .target(
            name: "RegistrySQLite",
            dependencies: [
                "AudienceEngine",
                "Registry",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        /// The store on PostgreSQL through postgres-nio, for several servers on one database: the
        /// same seams as the SQLite store, its migrations, the change feed with NOTIFY as a doorbell.
        .target(
            name: "RegistryPostgres",
            dependencies: [
                "AudienceEngine",
                "Registry",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        /// What every listener does to hostile or silent connections: deadlines, limits, making
        /// room, throttled log lines. Knows nothing of the registry.
        .target(
            name: "ConnectionGuards",
            dependencies: [
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            swiftSettings: strict
        ),
        /// FCM's XMPP connection server: the listener, sessions, the hub that routes upstream
        /// messages and receipts, acks and nacks through the message pipeline.
        .target(
            name: "XMPPServer",
            dependencies: [
                "ConnectionGuards",
                "FCMWire",
                "Registry",
                "XMPP",
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        /// The Hummingbird application: FCM-compatible and native controllers, auth, error
        /// envelopes, access log, metrics. No other front end: the XMPP server's sessions come in
        /// through `AppServerSessions` (in `Registry`), handed over by the composition root.
        .target(
            name: "RegistryServer",
            dependencies: [
                "Conditions",
                "ConnectionGuards",
                "FCMWire",
                "Registry",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The OpenAPI document and the console are compiled into the binary: the release
            // archive is one file.
            resources: [
                .embedInCode("Resources/openapi.json"),
                .embedInCode("Resources/console/index.html"),
                .embedInCode("Resources/console/console.css"),
                .embedInCode("Resources/console/main.js"),
                .embedInCode("Resources/console/api.js"),
                .embedInCode("Resources/console/dom.js"),
                .embedInCode("Resources/console/chart.js"),
                .embedInCode("Resources/console/overview.js"),
                .embedInCode("Resources/console/conditions.js"),
                .embedInCode("Resources/console/audiences.js"),
                .embedInCode("Resources/console/token.js"),
                .embedInCode("Resources/console/messages.js"),
                .embedInCode("Resources/console/relay.js"),
                .embedInCode("Resources/console/history.js"),
                .embedInCode("Resources/console/compose.js"),
                .embedInCode("Resources/console/webhooks.js"),
                .embedInCode("Resources/console/audit.js"),
            ],
            swiftSettings: strict
        ),
        /// The delivery engine, written once for every channel: the workers that drain the outbox,
        /// the channels by name and their verdicts, the per-project rate and pauses. The channels
        /// themselves (and the HTTP/2 fan-out they share) are under `Sources/Channels/`.
        .target(
            name: "Delivery",
            dependencies: [
                "Registry",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        /// How the server connects out: every address of a name raced as RFC 8305 (Happy Eyeballs)
        /// says, for every outgoing client, and a failed connection in plain words.
        .target(
            name: "Outbound",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        /// The HTTP/2 fan-out any channel posts through: one request per recipient as streams on a
        /// few TLS connections to an `https` upstream, the caller's path, headers and bodies, each
        /// answer told as it comes. Knows no channel.
        .target(
            name: "HTTP2FanOut",
            dependencies: [
                "Outbound",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Sources/Channels/HTTP2FanOut",
            swiftSettings: strict
        ),
        /// FCM HTTP v1 as a delivery channel, and the mirror's HTTP side (`Sources/Channels/`: one
        /// folder per channel).
        .target(
            name: "FCMRelay",
            dependencies: [
                "Delivery",
                "FCMWire",
                "HTTP2FanOut",
                "Outbound",
                "Registry",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/Channels/FCMRelay",
            swiftSettings: strict
        ),
        /// Webhooks over HTTP: the `WebhookChannel` that posts each event, signed, to an address
        /// it resolved and checked itself.
        .target(
            name: "Webhooks",
            dependencies: [
                "Delivery",
                "Outbound",
                "Registry",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Sources/Channels/Webhooks",
            swiftSettings: strict
        ),
        /// The composition root: the configuration and its option table, the store factory, and
        /// the one service group every long-running part of `serve` is a peer in.
        .target(
            name: "RegistryApp",
            dependencies: [
                "AudienceEngine",
                "Delivery",
                "FCMRelay",
                "FCMWire",
                "Registry",
                "RegistryPostgres",
                "RegistrySQLite",
                "RegistryServer",
                "Webhooks",
                "XMPPServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        /// The command line: parses and dispatches; also makes the local CA and certificates.
        .executableTarget(
            name: "fcm-registry",
            dependencies: [
                "AudienceEngine",
                "Conditions",
                "FCMRelay",
                "FCMWire",
                "Registry",
                "RegistryPostgres",
                "RegistrySQLite",
                "RegistryApp",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ConditionsTests",
            dependencies: [
                "Conditions",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "XMPPTests", dependencies: ["XMPP"], swiftSettings: strict),
        /// What the store and HTTP suites share: the backends a test runs on (`.onEveryBackend`).
        .target(
            name: "TestBackends",
            dependencies: [
                "Registry", "RegistryPostgres", "RegistrySQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Tests/TestBackends",
            swiftSettings: strict
        ),
        .testTarget(
            name: "RegistryTests",
            dependencies: [
                "AudienceEngine", "Conditions", "Registry", "RegistryPostgres", "RegistrySQLite", "TestBackends",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RegistryServerTests",
            dependencies: [
                "AudienceEngine",
                "Delivery",
                "FCMRelay",
                "Conditions",
                "ConnectionGuards",
                "FCMWire",
                "HTTP2FanOut",
                "Outbound",
                "Registry",
                "RegistryApp",
                "RegistrySQLite",
                "RegistryServer",
                "TestBackends",
                "Webhooks",
                "XMPP",
                "XMPPServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
    ]
)
