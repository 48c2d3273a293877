import Foundation
import HTTPTypes
import Hummingbird
import SyncCore
import SyncOData
import SyncSQL
import SyncServer

/// What the Node.js SDK's `e2etest/server.js` configures, in our words.
enum E2E {
    /// The secret tokens are signed with when neither the configuration nor the environment gives one.
    static let developmentSecret = "e2e-server-development-secret-not-for-production"

    static func configure(_ configuration: inout SyncServerConfiguration) throws {
        // The clients' suites send no version header on some calls, as the Node.js server (skipVersionCheck) took.
        configuration.checksAPIVersion = false
        configuration.tables = try tables()
        configuration.apis = apis(secret: configuration.auth?.hs256Secret)
        configuration.routes = { router in ParamsTestTable.addRoutes(to: router) }
    }

    /// The tables: string ids but for `IntIdRoundTripTable` and `intIdMovies` (integer ids the server gives, as the
    /// Node.js server's `autoIncrement: true`), page size 1,000; "number" columns are doubles.
    static func tables() throws -> [TableConfiguration] {
        func table(
            _ name: String, softDelete: Bool = false, columns: [String: SQLColumnType]? = nil,
            authenticated: Bool = false, integerIDs: Bool = false
        ) throws -> TableConfiguration {
            var table = try TableConfiguration(
                name: name, softDelete: softDelete, pageSize: 1000, maxTop: 1000, columns: columns)
            table.integerIDs = integerIDs
            table.access = Dictionary(
                uniqueKeysWithValues: TableOperation.allCases.map { ($0, authenticated ? .authenticated : .anonymous) })
            return table
        }
        // Each user sees and changes their own rows (the Node.js table filtered by, and stamped, userId).
        var authenticatedTable = try table("authenticated", softDelete: true, authenticated: true)
        authenticatedTable.perUser = true
        let movieColumns: [String: SQLColumnType] = [
            "title": .string, "duration": .double, "mpaaRating": .string, "releaseDate": .date,
            "bestPictureWinner": .bool, "year": .double,
        ]
        var movies = try table("movies", columns: movieColumns)
        // SQL Server's default collation, which the clients' tests expect ("Amélie" before "American Beauty").
        movies.collation = .caseInsensitive
        movies.seed = try movieSeed()
        // The same movies by number, 1 to 248 in the seed's order (the Node.js server seeds them without ids).
        var intIdMovies = try table("intIdMovies", columns: movieColumns, integerIDs: true)
        intIdMovies.collation = .caseInsensitive
        intIdMovies.seed = try movieSeed().map { movie in
            var fields = movie.objectValue ?? [:]
            fields["id"] = nil
            return .object(fields)
        }
        return [
            // Columns are added as the round-trip tests send them (string1, bool1, …), as Node.js's dynamic schema.
            try table("IntIdRoundTripTable", integerIDs: true),
            intIdMovies,
            authenticatedTable,
            try table("public"),
            try table(
                "blog_comments",
                columns: ["postId": .string, "commentText": .string, "name": .string, "test": .double]),
            try table(
                "blog_posts",
                columns: ["title": .string, "commentCount": .double, "showComments": .bool, "data": .string]),
            try table("dates", columns: ["date": .date, "dateOffset": .date]),
            movies,
            try table("OfflineReady"),
            try table("OfflineReadyNoVersionAuthenticated", authenticated: true),
            try table("StringIdRoundTripTableSoftDelete", softDelete: true),
            try table(
                "roundTripTable",
                columns: ["name": .string, "date1": .date, "bool": .bool, "integer": .double, "number": .double]),
        ]
    }

    /// The 248 movies, with ids `Movie 000` … `Movie 247` as the Node.js seed gives them.
    static func movieSeed() throws -> [JSONValue] {
        guard let text = EmbeddedResources.files["movies.json"] else {
            throw ConfigurationError("movies.json is not compiled into the e2e-server")
        }
        let movies = try JSONValue(parsing: Data(text.utf8)).arrayValue ?? []
        return movies.enumerated().map { index, movie in
            var fields = movie.objectValue ?? [:]
            fields["id"] = .string(String(format: "Movie %03d", index))
            return .object(fields)
        }
    }

    static func apis(secret: String?) -> [CustomAPI] {
        var apis = [
            CustomAPI("runtimeInfo", methods: [.get], access: .anonymous) { _ in
                APIResponse(body: [
                    "runtime": ["type": "swift", "version": "OfflineSync e2e-server"],
                    "features": [
                        "intIdTables": true, "stringIdTables": true, "nhPushEnabled": false,
                        "queryExpandSupport": false, "userEnabled": false, "liveSDKLogin": false,
                        "azureActiveDirectoryLogin": false, "singleSignOnLogin": false, "stringReplace": true,
                        "nodeRuntimeOnly": false, "dotNetRuntimeOnly": false,
                    ],
                ])
            },
            CustomAPI("jwtTokenGenerator", methods: [.get], access: .anonymous) { _ in
                guard let secret else { throw RequestRefusal(.notFound, "This server's tokens are not HS256") }
                let subject = "Facebook:someuserid@hotmail.com"
                let token = try await makeHS256Token(
                    subject: subject, secret: secret, issuer: "urn:microsoft:windows-azure:zumo",
                    audience: "urn:microsoft:windows-azure:zumo")
                return APIResponse(body: ["token": ["payload": ["sub": .string(subject)], "rawData": .string(token)]])
            },
            MovieFinder.api,
        ]
        for (name, access) in [
            ("applicationPermission", Access.anonymous), ("publicPermission", .anonymous),
            ("userPermission", .authenticated), ("adminPermission", .anonymous),
        ] {
            var api = CustomAPI(name, access: access, handler: Permission.echo)
            api.takesOtherBodies = true  // the suites send text/xml and text/plain bodies, echoed as strings
            apis.append(api)
        }
        return apis
    }
}

/// The permission APIs: they answer with the method, the query and the body (a body that is not JSON as its text), at
/// the status `?status=` asks, with the request's `x-test-zumo-*` headers sent back, as `?format=` asks: `json`, `xml`
/// (the Node.js server's `<root>…</root>`) or any other (JSON text with its brackets spelled `__{__`, `__[__`, …).
enum Permission {
    @Sendable static func echo(_ request: APIRequest) async throws -> APIResponse {
        var output: [String: JSONValue] = ["method": .string(request.method.rawValue), "user": ["level": "anonymous"]]
        if let caller = request.caller {
            output["user"] = ["level": "authenticated", "userId": .string(caller.subject)]
        }
        let query = request.parameters.filter { $0.key != "format" && $0.key != "status" }
        if !query.isEmpty { output["query"] = .object(query.mapValues(JSONValue.string)) }
        if let body = request.body { output["body"] = body }
        if let other = request.otherBody { output["body"] = .string(String(decoding: other.bytes, as: UTF8.self)) }
        var headers: HTTPFields = [:]
        for field in request.headers where field.name.canonicalName.hasPrefix("x-test-zumo-") {
            headers.append(field)
        }
        let status = HTTPResponse.Status(
            code: request.parameters["status"].flatMap(Int.init).flatMap { (100...599).contains($0) ? $0 : nil } ?? 200)
        switch request.parameters["format"] ?? "json" {
        case "json":
            return APIResponse(status: status, headers: headers, body: .object(output))
        case "xml":
            return APIResponse(
                status: status, headers: headers, contentType: "text/xml", text: "<root>\(xml(.object(output)))</root>")
        default:
            var text = ""
            for character in JSONValue.object(output).serialized() {
                switch character {
                case "{", "}", "[", "]": text += "__\(character)__"
                default: text.append(character)
                }
            }
            return APIResponse(status: status, headers: headers, contentType: "text/plain", text: text)
        }
    }

    /// A value as the Node.js E2E server writes it in XML: members by sorted name as elements, arrays as
    /// `<array><item>…</item></array>`, text as it is, null as `null`.
    static func xml(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .string(let text): text
        case .array(let items): "<array>" + items.map { "<item>\(xml($0))</item>" }.joined() + "</array>"
        case .object(let members): members.keys.sorted().map { "<\($0)>\(xml(members[$0] ?? .null))</\($0)>" }.joined()
        default: value.serialized()
        }
    }
}

/// `movieFinder`: movies by title or release date (`GET …/title/{title}`, `GET …/date/{year}/{month}/{day}`), and those
/// of a movie's year or duration (`POST …/moviesOnSameYear`, `…/moviesWithSameDuration`, ordered by `?orderBy=`,
/// `title` by default): `{"movies": [...]}`.
enum MovieFinder {
    static let api = CustomAPI("movieFinder", methods: [.get, .post], access: .anonymous) { request in
        var query = ODataQuery()
        switch (request.method, request.path.first, request.path.count) {
        case (.get, "title"?, 2):
            query.filter = .binary(.eq, .member("title"), .literal(.string(request.path[1])))
        case (.get, "date"?, 4):
            let parts = request.path.dropFirst().compactMap { Int($0) }
            var components = DateComponents(year: parts.first, month: parts.dropFirst().first, day: parts.last)
            components.timeZone = TimeZone(identifier: "UTC")
            guard parts.count == 3, let date = Calendar(identifier: .gregorian).date(from: components) else {
                throw RequestRefusal(.badRequest, "date/{year}/{month}/{day}, in numbers")
            }
            query.filter = .binary(.eq, .member("releaseDate"), .literal(.date(WireDate(date), .datetime)))
        case (.post, let name?, 1) where ["moviesOnSameYear", "moviesWithSameDuration"].contains(name):
            let field = name == "moviesOnSameYear" ? "year" : "duration"
            let capitalized = field.prefix(1).uppercased() + field.dropFirst()
            guard let movie = request.body?.objectValue, let value = movie[field] ?? movie[capitalized] else {
                throw RequestRefusal(.badRequest, "The body must be a movie with its \(field)")
            }
            let literal: ODataLiteral =
                if let int = value.intValue { .int(int) } else if let double = value.doubleValue {
                    .double(double)
                } else { .null }
            query.filter = .binary(.eq, .member(field), .literal(literal))
            query.orderBy = [ODataOrdering(request.parameters["orderBy"] ?? "title")]
        default:
            throw RequestRefusal(
                .notFound, "movieFinder: title/{title}, date/{y}/{m}/{d}, moviesOnSameYear, moviesWithSameDuration")
        }
        do {
            return APIResponse(body: ["movies": .array(try await request.tables.read("movies", query))])
        } catch let error as TableStoreError {
            throw RequestRefusal(.badRequest, error.description)
        }
    }
}

/// `ParamsTestTable`: a table with no rows of its own that answers every request with the request's query parameters,
/// as `{"id": …, "parameters": "<the parameters as JSON text>"}` (an array of one for a query), for the clients' tests
/// of what they send.
enum ParamsTestTable {
    static func addRoutes(to router: Router<SyncRequestContext>) {
        for method in [HTTPRequest.Method.get, .post, .patch, .delete] {
            for path in ["tables/ParamsTestTable", "tables/ParamsTestTable/{id}"] {
                router.on(RouterPath(path), method: method) { request, context in
                    let parameters = APIRequest.parameters(request.uri.query ?? "")
                    let id = Int(context.parameters.get("id") ?? parameters["id"] ?? "1") ?? 1
                    let item: JSONValue = [
                        "id": .int(Int64(id)),
                        "parameters": .string(JSONValue.object(parameters.mapValues(JSONValue.string)).serialized()),
                    ]
                    let single = context.parameters.get("id") != nil || method != .get
                    var response = Response(
                        status: .ok, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: (single ? item : [item]).serialized())))
                    response.headers[.cacheControl] = "no-cache"
                    return response
                }
            }
        }
    }
}
