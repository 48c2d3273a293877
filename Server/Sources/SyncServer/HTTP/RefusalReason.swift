/// Why a request was refused, as the `sync_refusals{sync_reason}` metric and the logs name it: one case per reason,
/// its raw value the wire string dashboards match (docs/deploy.md). A refusal without a reason of its own is
/// counted by its status (``APIError/refusalReason``).
enum RefusalReason: String, Sendable, CaseIterable {
    // Who may.
    case accessDisabled = "access_disabled"
    case forbidden = "auth_forbidden"
    case hostForbidden = "host_forbidden"
    // Tokens (``TokenRefusal``).
    case tokenMissing = "auth_missing"
    case tokenMalformed = "auth_malformed"
    case tokenAlgorithm = "auth_algorithm"
    case tokenSignature = "auth_signature"
    case tokenExpired = "auth_expired"
    case tokenNotYetValid = "auth_not_yet_valid"
    case tokenIssuer = "auth_issuer"
    case tokenAudience = "auth_audience"
    case tokenSubject = "auth_subject"
    // What was sent.
    case apiVersion = "api_version"
    case clientText = "client_text"
    case queryCost = "query_cost"
    // The app's hooks.
    case refusedByApp = "refused_by_app"
    case hookFailed = "hook_failed"
    // Attachments.
    case attachmentHash = "attachment_hash"
    case attachmentMissing = "attachment_missing"
    case uploadBudget = "upload_budget"
    case uploadBusy = "upload_busy"
    case uploadOffset = "upload_offset"
    case uploadSize = "upload_size"
    // By status, for refusals without a reason of their own.
    case invalidRequest = "invalid_request"
    case notFound = "not_found"
    case methodNotAllowed = "method_not_allowed"
    case conflict = "conflict"
    case preconditionFailed = "precondition_failed"
    case bodyTooLarge = "body_too_large"
    case unsupportedMediaType = "unsupported_media_type"
    case transferCoding = "transfer_coding"
    case unavailable = "unavailable"
    // Fair shares (docs/fairness.md)
    case callerBusy = "caller_busy"
    case callerRate = "caller_rate"
    case serverBusy = "server_busy"
}
