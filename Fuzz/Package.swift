// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets for the parsers that read client text (issue 44): built with `swift build --sanitize=fuzzer`
// and run by `.ci/fuzz` for a bounded time with fixed seeds, over the corpus in `Corpus/`, failing on a crash or on an
// input slower than the per-input limit. A package of its own, so that no other build carries the sanitizer.

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .unsafeFlags(["-parse-as-library"]),
]

let package = Package(
    name: "OfflineSyncFuzz",
    platforms: [.macOS(.v13)],
    dependencies: [.package(name: "OfflineSync", path: "..")],
    targets: [
        /// JSON bodies as the server reads them (`JSONValue.ParsingLimits.clientText`; a JWT's header too).
        .executableTarget(
            name: "fuzz-json", dependencies: [.product(name: "SyncCore", package: "OfflineSync")],
            swiftSettings: swiftSettings),
        /// Query strings: `$filter`, `$orderby`, `$select` and the rest, in both dialects, then the SQL translator.
        .executableTarget(
            name: "fuzz-odata",
            dependencies: [
                .product(name: "SyncCore", package: "OfflineSync"), .product(name: "SyncOData", package: "OfflineSync"),
                .product(name: "SyncSQL", package: "OfflineSync"),
            ],
            swiftSettings: swiftSettings),
        /// Collation keys, stream-safe text and LIKE/GLOB escapes.
        .executableTarget(
            name: "fuzz-collation",
            dependencies: [
                .product(name: "SyncCore", package: "OfflineSync"), .product(name: "SyncSQL", package: "OfflineSync"),
            ],
            swiftSettings: swiftSettings),
    ]
)
