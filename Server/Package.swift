// swift-tools-version: 6.1
import PackageDescription

// The server, the `todo` sample, the benchmark, the chaos test, the AsyncHTTPClient transport and every test that
// needs a server. Apps never resolve this package: they depend on the client package one directory up, which this
// one uses by path (`swift run --package-path Server sync-server`, `swift test --package-path Server`).

/// One set of strict settings for every target (see STYLE.md).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The test targets' settings: the strict ones, and no optimization even in a release build. The README's test command
/// builds this package in release, so that the servers, devices and chaos runs the tests start run at release speed;
/// the tests' own code only drives them, and optimizing its 14,000 lines of expanded `#expect`s whole-module cost CI
/// minutes for nothing the tests measure.
let testSwiftSettings: [SwiftSetting] = swiftSettings + [.unsafeFlags(["-Onone"], .when(configuration: .release))]

/// The client package, by the identity SwiftPM gives a path dependency.
let client = "OfflineSync"

let package = Package(
    name: "OfflineSyncServer",
    // Hummingbird 2 (its `hummingbird 2.0` availability) needs macOS 14; the server is not built for iOS.
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "SyncServer", targets: ["SyncServer"]),
        .library(name: "OfflineSyncAsyncHTTPClient", targets: ["OfflineSyncAsyncHTTPClient"]),
        .executable(name: "sync-server", targets: ["sync-server"]),
        .executable(name: "e2e-server", targets: ["e2e-server"]),
        .executable(name: "todo", targets: ["todo"]),
        .executable(name: "sync-bench", targets: ["sync-bench"]),
        .executable(name: "sync-chaos", targets: ["sync-chaos"]),
        .executable(name: "sync-soak", targets: ["sync-soak"]),
    ],
    dependencies: [
        .package(name: "OfflineSync", path: ".."),
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
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
    ],
    targets: [
        .target(
            name: "OfflineSyncAsyncHTTPClient",
            dependencies: [
                .product(name: "OfflineSync", package: client),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SyncServer",
            dependencies: [
                .product(name: "SyncCore", package: client),
                .product(name: "SyncOData", package: client),
                .product(name: "SyncSQL", package: client),
                .product(name: "SyncSQLite", package: client),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // The console and the OpenAPI documents are compiled in, so a copied binary needs no resource bundle.
            exclude: ["Resources"],
            swiftSettings: swiftSettings,
            plugins: ["EmbedResources"]
        ),
        .executableTarget(
            name: "e2e-server",
            dependencies: [
                "SyncServer",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "SyncCore", package: client), .product(name: "SyncOData", package: client),
                .product(name: "SyncSQL", package: client),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            exclude: ["Resources"],
            swiftSettings: swiftSettings,
            plugins: ["EmbedResources"]
        ),
        // Compiles a target's Resources folder into it (EmbeddedResources.files), run by the plugin below.
        .executableTarget(name: "embed-resources", swiftSettings: swiftSettings),
        .plugin(name: "EmbedResources", capability: .buildTool(), dependencies: ["embed-resources"]),
        .executableTarget(
            name: "sync-server",
            dependencies: [
                "SyncServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "todo",
            dependencies: [
                .product(name: "OfflineSync", package: client),
                .product(name: "OfflineSyncEncryption", package: client),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sync-bench",
            dependencies: [
                .product(name: "OfflineSync", package: client),
                .product(name: "OfflineSyncEncryption", package: client),
                .product(name: "SyncCore", package: client),
                .product(name: "SyncOData", package: client),
                .product(name: "SyncSQL", package: client),
                .product(name: "SyncSQLite", package: client),
                "TestSupport",
                "OfflineSyncAsyncHTTPClient",
                "SyncServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // What tests and tools share to run processes, raw connections and faults without blocking a cooperative
        // thread (`.ci/no-blocking` keeps it so).
        .target(
            name: "TestSupport",
            dependencies: [
                "SyncServer",
                .product(name: "SyncCore", package: client),
                .product(name: "SyncSQLite", package: client),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "OfflineSyncTesting", package: client),
                .product(name: "Subprocess", package: "swift-subprocess"),
                // `FilePath` for Subprocess: the System framework on Apple platforms, this package elsewhere.
                .product(name: "SystemPackage", package: "swift-system", condition: .when(platforms: [.linux])),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sync-soak",
            dependencies: [
                .product(name: "SyncCore", package: client),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sync-chaos",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                "TestSupport",
                .product(name: "OfflineSyncTesting", package: client),
                .product(name: "SyncCore", package: client), .product(name: "SyncSQLite", package: client),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OfflineSyncTests",
            dependencies: [
                "TestSupport",
                .product(name: "OfflineSync", package: client),
                .product(name: "SyncCore", package: client),
                .product(name: "SyncSQL", package: client),
                "OfflineSyncAsyncHTTPClient",
                .product(name: "OfflineSyncTesting", package: client),
                .product(name: "SyncOData", package: client),
                .product(name: "SyncSQLite", package: client),
                "SyncServer",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "SyncCore", package: client),
                .product(name: "OfflineSync", package: client),
                .product(name: "OfflineSyncTesting", package: client),
                "todo",
                "sync-server",
                "sync-chaos",
                "SyncServer",
                .product(name: "SyncSQLite", package: client),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "SyncServerTests",
            dependencies: [
                "TestSupport",
                "SyncServer",
                .product(name: "OfflineSyncTesting", package: client),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "SyncCore", package: client),
                .product(name: "SyncOData", package: client),
                .product(name: "SyncSQL", package: client),
                .product(name: "SyncSQLite", package: client),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: testSwiftSettings
        ),
    ]
)
