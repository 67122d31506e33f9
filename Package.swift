// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "fcm-registry",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fcm-registry", targets: ["fcm-registry"]),
        .library(name: "Conditions", targets: ["Conditions"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        /// The topic-condition language: lexer, parser, diagnostics, dialects, evaluation. Standard library only.
        .target(name: "Conditions"),
        /// The command line: parses and dispatches, nothing more.
        .executableTarget(
            name: "fcm-registry",
            dependencies: [
                "Conditions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "ConditionsTests",
            dependencies: [
                "Conditions",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
    ]
)
