// swift-tools-version: 6.1
import Foundation
import PackageDescription

// The client SDK. An app that depends on this package resolves GRDB, swift-log and swift-crypto (with its swift-asn1;
// built only where CryptoKit is missing, for the SHA-256 of attachments), nothing else: the server,
// the sample app, the benchmark, the chaos test and the tests that need a server are the package in `Server/`,
// which depends on this one by path.

/// One set of strict settings for every target (see STYLE.md).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

var dependencies: [Package.Dependency] = [
    .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    // Test-only: a dependency of a test target is never resolved by a package that depends on this one.
    .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
]
// `swift package generate-documentation` (.ci/docs) only when asked for, so that apps never resolve the plugin.
if ProcessInfo.processInfo.environment["OFFLINESYNC_DOCS"] == "1" {
    dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"))
}

let package = Package(
    name: "OfflineSync",
    // `Clock`/`Duration` (retry back-off, injectable clocks) and `any Clock<Duration>` need iOS 16 / macOS 13.
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        /// The SDK apps import: sync tables, the operation queue, push, pull, purge and conflicts.
        .library(name: "OfflineSync", targets: ["OfflineSync"]),
        /// An encrypted local store (opt-in; docs/encryption.md).
        .library(name: "OfflineSyncEncryption", targets: ["OfflineSyncEncryption"]),
        /// Test doubles for apps' own tests (a manual clock, an immediate clock).
        .library(name: "OfflineSyncTesting", targets: ["OfflineSyncTesting"]),
        /// The wire model alone (JSON values, ids, versions, dates), shared with the server.
        .library(name: "SyncCore", targets: ["SyncCore"]),
        /// OData query options and `$filter` expressions: parsing and rendering. For the server package; the
        /// SDK uses it without re-exporting it.
        .library(name: "SyncOData", targets: ["SyncOData"]),
        /// OData to SQL and the SQLite helpers, for the server package; not API for apps.
        .library(name: "SyncSQL", targets: ["SyncSQL"]),
        .library(name: "SyncSQLite", targets: ["SyncSQLite"]),
    ],
    dependencies: dependencies,
    targets: [
        .target(name: "SyncCore", swiftSettings: swiftSettings),
        .target(name: "SyncOData", dependencies: ["SyncCore"], swiftSettings: swiftSettings),
        // OData to parameterized SQL, for the server's stores and the client's local queries; the SDK
        // uses it without re-exporting it.
        .target(name: "SyncSQL", dependencies: ["SyncCore", "SyncOData"], swiftSettings: swiftSettings),
        .target(
            name: "SyncSQLite",
            dependencies: ["SyncCore", "SyncSQL", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "OfflineSync",
            dependencies: [
                "SyncCore",
                "SyncOData",
                "SyncSQL",
                "SyncSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                // Apple platforms have CryptoKit.
                .product(
                    name: "Crypto", package: "swift-crypto",
                    condition: .when(platforms: [.linux, .android, .windows, .openbsd, .wasi])),
            ],
            swiftSettings: swiftSettings
        ),
        // Opt-in: an encrypted local store (docs/encryption.md). Adds swift-crypto's CryptoExtras (scrypt).
        .target(
            name: "OfflineSyncEncryption",
            dependencies: [
                "OfflineSync",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "OfflineSyncTesting",
            dependencies: ["OfflineSync", "SyncCore", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OfflineSyncEncryptionTests",
            dependencies: [
                "OfflineSyncEncryption", "OfflineSync", "OfflineSyncTesting", "SyncCore",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OfflineSyncTests",
            dependencies: [
                "OfflineSync", "OfflineSyncTesting", "SyncCore", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncCoreTests",
            dependencies: [
                "SyncCore",
                "SyncOData",
                "OfflineSync",
                "SyncSQL",
                "SyncSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
