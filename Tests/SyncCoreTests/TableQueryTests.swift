import Foundation
import SyncCore
import Testing

@testable import OfflineSync

/// Queries written against a model render to the same OData as queries by field name; key paths that name no
/// single coded field are reported, not guessed.
@Suite(.timeLimit(.minutes(3))) struct TableQueryTests {
    enum Priority: String, Codable, CaseIterable { case low, normal, high }
    struct Place: Codable, Equatable { var city: String }

    struct Task: Codable {
        var id: String
        var title: String
        var complete: Bool
        var rank: Int
        var weight: Double
        var due: Date?
        var owner: UUID
        var priority: Priority
        var tags: [String]
        var place: Place
        var isUrgent: Bool { priority == .high && !complete }

        enum CodingKeys: String, CodingKey {
            case id, title = "text", complete, rank, weight, due = "dueDate", owner, priority, tags, place
        }
    }

    @Test func rendersTheSameODataAsQueriesByName() {
        let typed = TableQuery<Task>()
            .filter { $0.complete == false && $0.title.startsWith("Buy") }
            .orderBy(\.title)
            .orderBy(\.rank, .descending)
            .top(50)
        let named = TableQuery<Task>()
            .filter(QueryExpression.field("complete") == false && QueryExpression.field("text").startsWith("Buy"))
            .orderBy("text")
            .orderBy("rank", .descending)
            .top(50)
        #expect(typed.problems.isEmpty)
        #expect(typed.queryString == named.queryString)
        #expect(
            typed.queryString
                == "$filter=((complete%20eq%20false)%20and%20startswith(text,'Buy'))&$orderby=text%20asc,rank%20desc&$top=50"
        )
    }

    @Test func namesEveryKindOfFieldByItsCodingKey() {
        let query = TableQuery<Task>().filter {
            $0.id == "a" && $0.rank > 1 && $0.weight <= 2.5 && $0.due.isNull && $0.owner.isNotNull
                && $0.priority == "high" && $0.tags.isNotNull && $0.place.isNotNull
        }
        #expect(query.problems.isEmpty)
        #expect(
            query.description
                == "$filter=((id%20eq%20'a')%20and%20(rank%20gt%201)%20and%20(weight%20le%202.5)%20and%20(dueDate%20eq"
                + "%20null)%20and%20(owner%20ne%20null)%20and%20(priority%20eq%20'high')%20and%20(tags%20ne%20null)"
                + "%20and%20(place%20ne%20null))")
    }

    @Test func reportsKeyPathsThatNameNoSingleField() throws {
        let nested = TableQuery<Task>().orderBy(\.place.city)
        #expect(nested.problems.count == 1)
        #expect(nested.problems.first?.contains("names no field of Task") == true)
        #expect(nested.description.hasPrefix("invalid query: the key path"))

        let computed = TableQuery<Task>().filter { $0.isUrgent == true }.orderBy(\.place.city)
        #expect(computed.problems.count == 2)
        #expect(throws: ValueError.self) { try computed.checked() }
    }

    struct Unprobeable: Codable {
        enum Kind: String, Codable { case one, two }  // not CaseIterable: no probe value decodes
        var id: String
        var kind: Kind
    }

    @Test func saysWhyAModelCannotBeProbed() {
        let query = TableQuery<Unprobeable>().filter { $0.id == "a" }
        #expect(query.problems.count == 1)
        #expect(query.problems.first?.contains("could not be decoded from probe values") == true)
        #expect(query.problems.first?.contains(".field(\"name\")") == true)
        // By name, the same model queries fine.
        #expect(TableQuery<Unprobeable>().filter(.field("kind") == "one").problems.isEmpty)
    }
}
