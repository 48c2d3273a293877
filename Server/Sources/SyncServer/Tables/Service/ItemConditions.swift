import Foundation
import SyncCore

/// The conditions a request puts on an item's stored state (v3's conditional requests, PROTOCOL-v3.md §2), as data:
/// the wire reads them from the request's headers, and the table service weighs them against the stored row — for a
/// read (304, 412) and before a write (412), in one place.
struct ItemConditions: Sendable, Equatable {
    /// `If-Match`: a list of entity tags, `*`, quoted or bare.
    var ifMatch: String?
    /// `If-None-Match`.
    var ifNoneMatch: String?
    /// `If-Modified-Since` (a date that did not parse is no condition, as RFC 9110 §13.1.3 says).
    var ifModifiedSince: Date?
    /// `If-Unmodified-Since`.
    var ifUnmodifiedSince: Date?

    /// What the conditions say of one stored item.
    struct Verdict: Equatable {
        /// `If-Match` names none of its versions (an empty or unreadable value names none).
        var matchFails = false
        /// `If-Unmodified-Since` (without `If-Match`) is before its last change.
        var unmodifiedFails = false
        /// It is not modified: `If-None-Match` names its version, or (without `If-None-Match`) `If-Modified-Since`
        /// is not before its last change.
        var notModified = false
    }

    /// What the conditions say of `item`. Dates compare in whole seconds, as RFC 9110 §13.1.3–4 has it [ours]:
    /// `Last-Modified` has whole seconds, so a client that sends back the date it got must pass (the toolkit compares
    /// its milliseconds, PROTOCOL-v3.md §2).
    func verdict(on item: JSONValue) -> Verdict {
        let changed = item.updatedAt.map { Self.wholeSeconds($0.date) }
        var verdict = Verdict()
        verdict.matchFails = ifMatch.map { !Self.entityTags($0, match: item.version, weakMatches: false) } ?? false
        if ifMatch == nil, let since = ifUnmodifiedSince, let changed {
            verdict.unmodifiedFails = changed > since
        }
        if let ifNoneMatch {
            verdict.notModified = Self.entityTags(ifNoneMatch, match: item.version, weakMatches: true)
        } else if let since = ifModifiedSince, let changed {
            verdict.notModified = changed <= since
        }
        return verdict
    }

    /// Whether a list of entity tags (`If-Match`, `If-None-Match`) names `version`: `*` names any, a weak tag
    /// (`W/"…"`) only when `weakMatches`; tags may be quoted or bare.
    static func entityTags(_ header: String, match version: Version?, weakMatches: Bool) -> Bool {
        for entry in header.split(separator: ",") {
            var tag = entry.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") {
                guard weakMatches else { continue }
                tag.removeFirst(2)
            }
            if tag.count >= 2, tag.hasPrefix("\""), tag.hasSuffix("\"") { tag = String(tag.dropFirst().dropLast()) }
            if let version, tag == version.rawValue { return true }
        }
        return false
    }

    /// `date` without its fraction of a second.
    static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }
}
