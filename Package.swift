// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "fcm-registry",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fcm-registry", targets: ["fcm-registry"]),
        .library(name: "Conditions", targets: ["Conditions"]),
        .library(name: "Registry", targets: ["Registry"]),
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
    ],
    targets: [
        /// The topic-condition language: lexer, parser, diagnostics, dialects, evaluation. Standard library only.
        .target(name: "Conditions"),
        /// The domain: projects, tokens, groups, notification keys, topics, limits, and the store interface.
        .target(
            name: "Registry",
            dependencies: [
                "Conditions",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        /// The XMPP wire: a bounded stream parser for hostile XML, SASL PLAIN credentials, and the
        /// exact stanzas of FCM's XMPP connection server. Foundation only.
        .target(name: "XMPP"),
        /// The store on SQLite through GRDB, with its migrations.
        .target(
            name: "RegistrySQLite",
            dependencies: [
                "Registry",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        /// The Hummingbird application: FCM-compatible routes, native routes, auth, error envelopes.
        .target(
            name: "RegistryServer",
            dependencies: [
                "Conditions",
                "Registry",
                "XMPP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        /// The command line: parses and dispatches, nothing more.
        .executableTarget(
            name: "fcm-registry",
            dependencies: [
                "Conditions",
                "Registry",
                "RegistrySQLite",
                "RegistryServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "ConditionsTests",
            dependencies: [
                "Conditions",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(name: "XMPPTests", dependencies: ["XMPP"]),
        .testTarget(
            name: "RegistryTests",
            dependencies: ["Registry", "RegistrySQLite", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "RegistryServerTests",
            dependencies: [
                "Registry",
                "RegistrySQLite",
                "RegistryServer",
                "XMPP",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
    ]
)
