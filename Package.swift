// swift-tools-version: 6.1
import PackageDescription

/// One set of strict settings for every target (see STYLE.md).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "OfflineSync",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "SyncCore", targets: ["SyncCore"]),
        .library(name: "SyncSQL", targets: ["SyncSQL"]),
        .library(name: "OfflineSync", targets: ["OfflineSync"]),
        .library(name: "OfflineSyncTesting", targets: ["OfflineSyncTesting"]),
        .library(name: "OfflineSyncAsyncHTTPClient", targets: ["OfflineSyncAsyncHTTPClient"]),
        .library(name: "SyncServer", targets: ["SyncServer"]),
        .executable(name: "sync-server", targets: ["sync-server"]),
        .executable(name: "todo", targets: ["todo"]),
        .executable(name: "sync-bench", targets: ["sync-bench"]),
        .executable(name: "sync-chaos", targets: ["sync-chaos"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .target(name: "SyncCore", swiftSettings: swiftSettings),
        // OData to parameterized SQL, for the server's stores and the client's local queries; the SDK
        // uses it without re-exporting it.
        .target(name: "SyncSQL", dependencies: ["SyncCore"], swiftSettings: swiftSettings),
        .target(
            name: "SyncSQLite",
            dependencies: ["SyncCore", "SyncSQL", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "OfflineSync",
            dependencies: [
                "SyncCore",
                "SyncSQL",
                "SyncSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(name: "OfflineSyncTesting", dependencies: ["OfflineSync"], swiftSettings: swiftSettings),
        .target(
            name: "OfflineSyncAsyncHTTPClient",
            dependencies: [
                "OfflineSync",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SyncServer",
            dependencies: [
                "SyncCore",
                "SyncSQL",
                "SyncSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
            ],
            resources: [.copy("Resources/openapi.yaml")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sync-server",
            dependencies: [
                "SyncServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "todo",
            dependencies: ["OfflineSync", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sync-bench",
            dependencies: [
                "OfflineSync",
                "SyncSQL",
                "OfflineSyncAsyncHTTPClient",
                "SyncServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sync-chaos",
            dependencies: [
                "SyncCore", "SyncSQLite", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncCoreTests",
            dependencies: [
                "SyncCore",
                "SyncSQL",
                "SyncSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OfflineSyncTests",
            dependencies: [
                "OfflineSync",
                "OfflineSyncAsyncHTTPClient",
                "OfflineSyncTesting",
                "SyncServer",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "SyncCore",
                "OfflineSync",
                "todo",
                "sync-server",
                "sync-chaos",
                "SyncServer",
                "SyncSQLite",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncServerTests",
            dependencies: [
                "SyncServer",
                "SyncSQL",
                "SyncSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
