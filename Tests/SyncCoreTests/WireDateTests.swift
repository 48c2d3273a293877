import Foundation
import PropertyBased
import SyncCore
import Testing

@Suite(.timeLimit(.minutes(3))) struct WireDateTests {
    @Test(arguments: [
        ("2012-05-21T00:00:29.300Z", "2012-05-21T00:00:29.300Z"),
        ("2012-05-21T00:00:29Z", "2012-05-21T00:00:29.000Z"),
        ("2012-05-21T00:00:29.3Z", "2012-05-21T00:00:29.300Z"),
        ("2012-05-21T00:00:29.12Z", "2012-05-21T00:00:29.120Z"),
        ("2012-05-21T00:00:29.1234567Z", "2012-05-21T00:00:29.123Z"),
        ("1994-10-13T17:00:00.0000000+07:00", "1994-10-13T10:00:00.000Z"),
        ("1999-12-31T23:30:00.000-01:00", "2000-01-01T00:30:00.000Z"),
        ("1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z"),
        ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"),
        ("2000-02-29T12:00:00.000Z", "2000-02-29T12:00:00.000Z"),
        ("0001-01-01T00:00:00.000Z", "0001-01-01T00:00:00.000Z"),
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
    ])
    func parsesAndFormatsWithThreeFractionDigits(text: String, canonical: String) throws {
        let date = try #require(WireDate(parsing: text))
        #expect(date.description == canonical)
    }

    @Test(arguments: [
        "", "2012-05-21", "2012-05-21T00:00:29", "2012-05-21T00:00:29.Z", "2012-05-21T00:00:29.12345678Z",
        "2012-13-01T00:00:00Z", "2013-02-29T00:00:00Z", "2012-05-21T24:00:00Z", "2012-05-21T00:60:00Z",
        "2012-05-21T00:00:60Z", "2012-05-21 00:00:29Z", "2012-05-21T00:00:29+0700", "2012-05-21T00:00:29.300Zx",
        "12-05-21T00:00:29Z",
    ])
    func refusesMalformedDates(text: String) {
        #expect(WireDate(parsing: text) == nil)
    }

    @Test func convertsToAndFromFoundationDates() throws {
        let date = try #require(WireDate(parsing: "2012-05-21T00:00:29.300Z"))
        #expect(WireDate(date.date) == date)
        #expect(abs(date.date.timeIntervalSince1970 - 1_337_558_429.3) < 0.0005)
        #expect(WireDate(Date(timeIntervalSince1970: 1.0009)).description == "1970-01-01T00:00:01.000Z")
    }

    @Test func codesAsItsWireString() throws {
        let date = WireDate(millisecondsSince1970: 1_337_558_429_300)
        let data = try JSONEncoder().encode([date])
        #expect(String(decoding: data, as: UTF8.self) == #"["2012-05-21T00:00:29.300Z"]"#)
        #expect(try JSONDecoder().decode([WireDate].self, from: data) == [date])
    }

    @Test func everyMillisecondRoundTripsThroughText() async {
        await propertyCheck(count: 500, input: Gen.int64(in: -62_135_596_800_000...253_402_300_799_999)) { ms in
            let date = WireDate(millisecondsSince1970: ms)
            #expect(WireDate(parsing: date.description) == date)
        }
    }
}
