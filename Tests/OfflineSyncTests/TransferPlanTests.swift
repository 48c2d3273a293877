import Testing

@testable import OfflineSync

/// The attachment transfers' decisions, answer by answer, without a server: every status × `Upload-Offset` cell of
/// an upload, every status × `Content-Range` cell of a download, and whole sequences (a lost reply, a restart).
@Suite(.timeLimit(.minutes(3))) struct TransferPlanTests {
    // A 10-byte file in 4-byte parts.
    func upload() -> UploadPlan { UploadPlan(size: 10, chunkSize: 4, conflictLimit: 2) }

    @Test(
        arguments: [
            // status, Upload-Offset, action
            (200, nil, UploadPlan.Action.stored),
            (200, 3, .stored),
            (404, 0, .send(start: 0, count: 4, wait: false)),
            (404, 6, .send(start: 6, count: 4, wait: false)),
            (404, 10, .send(start: 6, count: 4, wait: false)),  // every byte there, not yet stored: the last part again
            (404, 11, .refused),  // past the file
            (404, -1, .refused),
            (404, nil, .refused),
            (401, nil, .refused),
            (500, 0, .refused),
        ] as [(Int, Int?, UploadPlan.Action)])
    func theHeadSaysWhereTheUploadBegins(status: Int, offset: Int?, action: UploadPlan.Action) {
        var plan = upload()
        #expect(plan.head(status: status, uploadOffset: offset) == action)
    }

    @Test(
        arguments: [
            // status, Upload-Offset, action — after sending 4..<8 of a 10-byte file the server held 4 bytes of
            (201, nil, UploadPlan.Action.stored),
            (200, 8, .stored),
            (204, 8, .send(start: 8, count: 2, wait: false)),
            (204, 6, .send(start: 6, count: 4, wait: false)),  // took part of it
            (204, 10, .send(start: 6, count: 4, wait: false)),
            (204, 4, .refused),  // did not move: it would send the same part forever
            (204, 11, .refused),
            (204, nil, .refused),
            (409, 4, .send(start: 4, count: 4, wait: true)),  // another request holds it: wait, then the same part
            (409, 8, .send(start: 8, count: 2, wait: false)),  // a lost reply: it has the part already
            (409, 2, .send(start: 2, count: 4, wait: false)),
            (409, 12, .refused),
            (409, nil, .refused),
            (413, nil, .refused),
            (503, nil, .refused),  // the retries are the transport's; what comes past them refuses
        ] as [(Int, Int?, UploadPlan.Action)])
    func eachAnswerToAPartSaysWhatComesNext(status: Int, offset: Int?, action: UploadPlan.Action) {
        var plan = upload()
        #expect(plan.head(status: 404, uploadOffset: 4) == .send(start: 4, count: 4, wait: false))
        #expect(plan.answered(status: status, uploadOffset: offset) == action)
    }

    @Test func conflictsPastTheLimitMakeTheServerUnavailable() {
        var plan = upload()
        _ = plan.head(status: 404, uploadOffset: 0)
        #expect(plan.answered(status: 409, uploadOffset: 0) == .send(start: 0, count: 4, wait: true))
        #expect(plan.answered(status: 204, uploadOffset: 4) == .send(start: 4, count: 4, wait: false))
        #expect(plan.answered(status: 409, uploadOffset: 4) == .send(start: 4, count: 4, wait: true))
        #expect(plan.answered(status: 409, uploadOffset: 4) == .unavailable(conflicts: 3))
        #expect(plan.conflicts == 3)
    }

    @Test func anEmptyFileGoesWholeAndEveryByteThereIsSentAgainUntilStored() {
        var empty = UploadPlan(size: 0, chunkSize: 4, conflictLimit: 2)
        #expect(empty.head(status: 404, uploadOffset: 0) == .send(start: 0, count: 0, wait: false))
        #expect(empty.answered(status: 201, uploadOffset: nil) == .stored)
        var plan = upload()
        _ = plan.head(status: 404, uploadOffset: 0)
        #expect(plan.answered(status: 204, uploadOffset: 4) == .send(start: 4, count: 4, wait: false))
        #expect(plan.answered(status: 204, uploadOffset: 8) == .send(start: 8, count: 2, wait: false))
        // All 10 bytes held, but the server died before naming the file: the last part finishes it.
        #expect(plan.answered(status: 204, uploadOffset: 10) == .send(start: 6, count: 4, wait: false))
        #expect(plan.answered(status: 201, uploadOffset: nil) == .stored)
        #expect(plan.offset == 10)
    }

    @Test(
        arguments: [
            // status, Content-Range, body, step, offset after, size after — from a part file holding 4 bytes
            (206, "bytes 4-7/10", 4, DownloadPlan.Step.append, 8, 10 as Int?),
            (206, "bytes 4-9/10", 6, .append, 10, 10),
            (206, "bytes 0-3/10", 4, .unlabelled, 4, nil),  // not the range asked
            (206, nil, 4, .unlabelled, 4, nil),
            (206, "bytes 4-7/*", 4, .unlabelled, 4, nil),
            (200, nil, 10, .replace, 10, 10),  // a server that ignores ranges sends it whole
            (416, "bytes */3", 0, .restart, 0, nil),  // an earlier try left more than the file has
            (416, "bytes */0", 0, .restart, 0, nil),
            (404, nil, 0, .notFound, 4, nil),
            (403, nil, 0, .refused, 4, nil),
            (500, nil, 0, .refused, 4, nil),
        ] as [(Int, String?, Int, DownloadPlan.Step, Int, Int?)])
    func eachAnswerToARangeSaysWhatToDoWithThePartFile(
        status: Int, contentRange: String?, body: Int, step: DownloadPlan.Step, offset: Int, size: Int?
    ) {
        var plan = DownloadPlan(chunkSize: 4, offset: 4)
        #expect(plan.range == "bytes=4-7")
        #expect(plan.answered(status: status, contentRange: contentRange, bodyCount: body) == step)
        #expect(plan.offset == offset)
        #expect(plan.size == size)
    }

    @Test func aDownloadRestartsOnceAndAnEmptyFileIsComplete() {
        var plan = DownloadPlan(chunkSize: 4, offset: 12)
        #expect(!plan.isComplete)
        #expect(plan.answered(status: 416, contentRange: "bytes */10", bodyCount: 0) == .restart)
        #expect(plan.range == "bytes=0-3")
        #expect(plan.answered(status: 206, contentRange: "bytes 0-3/10", bodyCount: 4) == .append)
        #expect(plan.answered(status: 206, contentRange: "bytes 4-7/10", bodyCount: 4) == .append)
        #expect(plan.answered(status: 206, contentRange: "bytes 8-9/10", bodyCount: 2) == .append)
        #expect(plan.isComplete)
        // A second restart is not taken: the server changes its mind about the file.
        var twice = DownloadPlan(chunkSize: 4, offset: 12)
        _ = twice.answered(status: 416, contentRange: "bytes */10", bodyCount: 0)
        _ = twice.answered(status: 206, contentRange: "bytes 0-3/10", bodyCount: 4)
        #expect(twice.answered(status: 416, contentRange: "bytes */2", bodyCount: 0) == .refused)
        var empty = DownloadPlan(chunkSize: 4, offset: 0)
        #expect(empty.answered(status: 416, contentRange: "bytes */0", bodyCount: 0) == .empty)
        #expect(empty.isComplete)
        #expect(empty.size == 0)
    }
}
